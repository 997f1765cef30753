"""The package's layout is the design's layers: these tests fail on an import cycle, an import that reaches up a layer,
a module over 400 lines, or a notebook whose number does not name the subpackage it exports to.

Layers, lowest first (a module may import its own subpackage and any lower layer, never a higher or a sibling one):

    core  <-  toy, execution  <-  world_model  <-  autoresearch  <-  adapters, embodied  <-  cli

Imports inside functions count: a lazy import is still a dependency, it only defers the cost.
"""
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "wmrl"
RANK = {"core": 0, "toy": 1, "execution": 1, "world_model": 2, "autoresearch": 3, "adapters": 4, "embodied": 4,
        "cli": 5, "wmrl": 6}  # "wmrl": the package root, which names the correction step (lazily) for users
# Notebook numbers name subpackages: the hundreds digit, 9xx for the top-level entry points.
BY_DIGIT = {"0": "toy", "1": "core", "2": "execution", "3": "world_model", "4": "autoresearch", "5": "adapters",
            "6": "embodied", "9": None}
GENERATED = {"_modidx.py"}
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py")) if p.name not in GENERATED}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    "Every wmrl module `name` imports, at any depth of its code (relative imports resolved)."
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            # `from wmrl.core import debias` names a module; `from wmrl.core.debias import x` names its parent.
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target != "wmrl":
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else "cli" if parts[-1] == "cli" else parts[-1]


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    "One import cycle as a path [a, b, ..., a], or None (iterative DFS, three colours)."
    colour = {n: 0 for n in g}
    for start in g:
        if colour[start]:
            continue
        path, iters = [start], [iter(sorted(g[start]))]
        colour[start] = 1
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                colour[path.pop()] = 2
                iters.pop()
            elif colour.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif colour.get(nxt) == 0:
                colour[nxt] = 1
                path.append(nxt)
                iters.append(iter(sorted(g[nxt])))
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_import_graph_sees_lazy_and_relative_imports(tmp_path):
    known = {"wmrl.core.debias", "wmrl.core.settings", "wmrl.core", "wmrl.execution.grading"}
    src = tmp_path / "m.py"
    src.write_text("from .debias import x\ndef f():\n    from wmrl.execution.grading import y\n"
                   "    from wmrl.core import settings\n")
    assert imports_of("wmrl.core.m", src, known) == {"wmrl.core.debias", "wmrl.execution.grading",
                                                     "wmrl.core.settings", "wmrl.core"}


def test_no_import_cycles():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def layer_violations(g: dict[str, set[str]]) -> list[str]:
    "Imports of a sibling or higher layer (a module's own subpackage is always allowed)."
    return sorted(f"{name} ({layer(name)}) imports {dep} ({layer(dep)})" for name, deps in g.items() for dep in deps
                  if layer(dep) != layer(name) and RANK[layer(dep)] >= RANK[layer(name)])


def test_the_layer_check_flags_upward_and_sideways_imports():
    g = {"wmrl.core.a": {"wmrl.execution.b"}, "wmrl.execution.b": {"wmrl.core.a", "wmrl.toy.c"},
         "wmrl.toy.c": {"wmrl.core.a"}, "wmrl.adapters.d": {"wmrl.autoresearch.e", "wmrl.adapters.f"}}
    assert layer_violations(g) == ["wmrl.core.a (core) imports wmrl.execution.b (execution)",
                                   "wmrl.execution.b (execution) imports wmrl.toy.c (toy)"]


def test_imports_only_reach_down_the_layers():
    bad = layer_violations(graph())
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_no_module_over_400_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split the notebook): {long}"


def test_every_notebook_exports_to_the_subpackage_its_number_names():
    wrong = []
    for nb in sorted((ROOT / "nbs").glob("[0-9][0-9][0-9]_*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        found = [m.group(1) for c in cells if c["cell_type"] == "code"
                 for m in [re.search(r"^#\| ?default_exp (\S+)", "".join(c["source"]), re.M)] if m]
        sub, stem = BY_DIGIT.get(nb.name[0], "?"), nb.stem.split("_", 1)[1]
        expected = stem if sub is None else f"{sub}.{stem}"
        if found != [expected]:
            wrong.append(f"{nb.name}: default_exp {found}, expected [{expected!r}]")
    assert not wrong, "\n".join(wrong)


def test_import_wmrl_stays_light():
    heavy = ("torch", "trl", "vllm", "docker", "transformers")
    code = ("import sys, wmrl, wmrl.core, wmrl.execution, wmrl.world_model, wmrl.autoresearch, wmrl.adapters; "
            f"print([m for m in sys.modules if m.split('.')[0] in {heavy!r}])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]", out


def test_reading_a_minivla_run_loads_no_torch_until_a_model_is_built():
    "wmrl.embodied.prismatic reads run folders and vocabulary rules; torch comes with the model (vla_model), on demand."
    code = ("import sys, wmrl.embodied.prismatic as p; before = 'torch' in sys.modules; "
            "p.prismatic_vocab('prism-qwen25-extra-dinosiglip-224px+0_5b', 'action_tokenizer', {'bpe_vocab': 1, 'added_tokens': 0}); "
            "print(before, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["False", "False"], out  # on 339a106: True (vla_model was imported with the module)


@pytest.mark.parametrize("sub", sorted(set(RANK) - {"cli"}))
def test_every_layer_has_modules(sub):
    assert any(layer(name) == sub for name in modules()), f"no module in wmrl.{sub}"


def test_the_notebook_map_names_every_chapter():
    "nbs/README.md's map is how a reader finds a module's notebook: a chapter missing from it is a dead end."
    text = (ROOT / "nbs" / "README.md").read_text()
    missing = [nb.stem for nb in sorted((ROOT / "nbs").glob("[0-9][0-9][0-9]_*.ipynb")) if f"`{nb.stem}`" not in text]
    assert not missing, f"nbs/README.md's map lacks {missing}"
