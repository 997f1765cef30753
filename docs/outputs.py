"""Store the teaching chapters' outputs in nbs/, so their figures and tables show where the repository is read
(GitHub, JupyterLab before anything runs, the site without executing). `make chapters` runs this.

    python docs/outputs.py                # every teaching chapter whose stored outputs are not current
    python docs/outputs.py --check        # exit 1, one line per chapter that is stale (tests/test_chapter_outputs.py)
    python docs/outputs.py --force 147_ppi

Each chapter runs as `nbdev-test` runs it (docs/build.py's `execute`: execnb in the chapter's folder, `slow` and `gpu`
cells left out), in a fresh interpreter. Its outputs go back into the notebook in the form JupyterLab itself saves
(consecutive stream outputs joined, as JupyterLab's output area joins them on opening) and through nbdev-clean, so
opening and saving the chapter in `make lab` changes nothing. A widget's view is dropped: it needs a live kernel, and
its text form stays. The notebook's metadata records `outputs_of`, the hash of the chapter's code cells and the
package files they run (build.outputs_key); a stored output whose hash no longer matches is stale, and the test says so.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("docs_build", HERE / "build.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)

WIDGET_MIMES = ("application/vnd.jupyter.widget-view+json", "application/vnd.jupyter.widget-state+json")


def _lines(text) -> list[str]:
    "nbformat's on-disk form of a text field: a list of lines, each keeping its newline."
    text = "".join(text) if isinstance(text, list) else text
    return text.splitlines(keepends=True)


def saved_outputs(outputs: list) -> list[dict]:
    """Outputs as JupyterLab would save them: a stream directly after one of the same name is joined to it, a widget's
    view is dropped (its text/plain stays), text fields are lists of lines, no execution count."""
    kept: list[dict] = []
    for raw in outputs:
        output = json.loads(json.dumps(raw, default=dict))
        if output["output_type"] == "stream":
            if kept and kept[-1]["output_type"] == "stream" and kept[-1]["name"] == output["name"]:
                kept[-1]["text"] = _lines("".join(kept[-1]["text"]) + "".join(output["text"]))
                continue
            output["text"] = _lines(output["text"])
        elif "data" in output:
            data = {k: v for k, v in output["data"].items() if k not in WIDGET_MIMES}
            if not data:
                continue
            output["data"] = {k: (_lines(v) if k.startswith("text/") else "".join(v) if isinstance(v, list) else v)
                              for k, v in data.items()}
            output.setdefault("metadata", {})
            if output["output_type"] == "execute_result":
                output["execution_count"] = None
        elif output["output_type"] == "error":
            raise RuntimeError(f"a cell raised {output.get('ename')}: {output.get('evalue')}")
        kept.append(output)
    return kept


def store_one(name: str) -> int:
    "`--one NAME`: execute chapter NAME in this process and write its outputs and their key into nbs/NAME.ipynb."
    from nbdev.clean import nbdev_clean
    path = build.NBS / f"{name}.ipynb"
    key = build.outputs_key(name)  # before running: what the outputs are made from
    executed, seconds = build.execute(path)
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    ran = [c for c in executed.cells if c.cell_type == "code"]
    if [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in code] != [c.source for c in ran]:
        print(f"docs/outputs.py: {name} changed while it ran; nothing written", file=sys.stderr)
        return 1
    for cell, done in zip(code, ran):
        cell["outputs"] = saved_outputs(done.get("outputs", []))
        cell["execution_count"] = None
    nb["metadata"][build.OUTPUTS_KEY] = {"outputs_of": key}
    partial = path.with_suffix(".ipynb.tmp")
    partial.write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    partial.replace(path)
    nbdev_clean(fname=str(path))  # the form the pre-save hook writes (pyproject's nbdev settings)
    print(f"{name}: executed in {seconds:.0f} s, {sum(len(c['outputs']) for c in code)} outputs stored")
    return 0


def stale(names: list[str]) -> list[str]:
    return [n for n in names if not build.outputs_current(n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="docs/outputs.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="chapters (default: the teaching chapters, docs/build.py's TEACHING)")
    parser.add_argument("--check", action="store_true", help="run nothing: exit 1 naming each stale chapter")
    parser.add_argument("--force", action="store_true", help="run the chapters even where their outputs are current")
    parser.add_argument("--workers", type=int, default=2, help="chapters run at once (default 2)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: one chapter, in this fresh interpreter
    args = parser.parse_args(argv)
    if args.one:
        return store_one(args.one)
    unknown = [n for n in args.names if n not in build.TEACHING]
    if unknown:
        print(f"docs/outputs.py: {unknown[0]!r} is not a teaching chapter; they are {', '.join(build.TEACHING)}",
              file=sys.stderr)
        return 2
    names = args.names or build.TEACHING
    if args.check:
        behind = stale(names)
        for name in behind:
            why = "stores no outputs" if not build.stored_outputs(name)[1] else \
                "its code or the modules it runs changed since they were made"
            print(f"{name}: stored outputs are stale ({why}): run `make chapters`", file=sys.stderr)
        return 1 if behind else 0
    todo = names if args.force else stale(names)
    if not todo:
        print(f"chapters: all {len(names)} teaching chapters' stored outputs are current")
        return 0
    estimate = build.estimate([(n, "execute") for n in todo], {}, args.workers)  # the site's own measured seconds
    print(f"chapters: {len(todo)} to execute ({', '.join(todo)}); estimate ~{build._minutes(estimate)} on "
          f"{args.workers} workers (docs/build.py's measured seconds, 2 cores at load 6-7)", flush=True)
    started, failed = time.time(), []
    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = {pool.submit(subprocess.run, [sys.executable, __file__, "--one", n], capture_output=True, text=True): n
                   for n in todo}
        for done, future in enumerate(as_completed(futures), 1):
            name, result = futures[future], future.result()
            line = result.stdout.strip().splitlines()[-1] if result.returncode == 0 else f"{name}: FAILED"
            print(f"chapters: [{done}/{len(todo)}] {line} ({build._minutes(time.time() - started)} so far)", flush=True)
            if result.returncode:
                failed.append(name)
                print(result.stderr.strip()[-2000:], file=sys.stderr)
    for name in failed:
        print(f"docs/outputs.py: {name} failed; its notebook is as it was", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
