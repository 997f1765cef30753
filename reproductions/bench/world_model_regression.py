"""Does a change to the static world model move any prediction on the programs the AutoResearch grids train on?

Samples programs uniformly over the policy's slots (seeded), renders each on every built suite task, and predicts them
with the static world model and the fitted quality prior of two checkouts of the package: the one on sys.path (this
clone) and --old, a folder holding another commit's `wmrl` package and `toy/` data (for example
`git archive <commit> wmrl toy | tar -x -C /tmp/old`). Prints how many predictions (status, score, error type, line) differ; exit status 1 if any do.
The hand-written reference suites (this clone's `toy/solutions/*`, on `toy/tasks/iris`, each with a real record) are
predicted by both checkouts too and counted apart; the honest ones (really ok) that the new checkout predicts to fail
are listed, and make the exit status 1 as well.

    python reproductions/bench/world_model_regression.py --old /tmp/old [--per-task 300] [--tasks-dir ~/.cache/wmrl/tasks]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

WORKER = """
import json, sys
import numpy as np
from pathlib import Path
from wmrl.autoresearch.agent import SLOTS
from wmrl.autoresearch.programs import Program
from wmrl.autoresearch.render import render
from wmrl.execution.tasks import load_task
from wmrl.world_model.prior import load_prior
from wmrl.world_model.static import StaticWorldModel
tasks_dir, per_task, toy = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
rng = np.random.default_rng(0)
wm, rows = StaticWorldModel(quality_prior=load_prior()), []
iris = load_task(toy / "tasks/iris")
for folder in sorted(p for p in (toy / "solutions").iterdir() if (p / "records.json").is_file()):
    records = json.loads((folder / "records.json").read_text())
    for name in sorted(records):
        p = wm.predict([(iris, (folder / f"{name}.py").read_text())])[0]
        rows.append([f"suite:{folder.name}", f"{name} (really {records[name]['status']})", p.status, None if p.score != p.score else round(p.score, 9), p.error_type, p.line])
for task_dir in sorted(p for p in tasks_dir.iterdir() if (p / "public").is_dir()):
    task = load_task(task_dir)
    programs = [Program(**{s: v[rng.integers(len(v))] for s, v in SLOTS.items()}) for _ in range(per_task)]
    for program, p in zip(programs, wm.predict([(task, render(program, task)) for program in programs])):
        rows.append([task_dir.name, repr(program), p.status, None if p.score != p.score else round(p.score, 9), p.error_type, p.line])
print(json.dumps(rows))
"""


def predictions(package_root: str | None, tasks_dir: Path, per_task: int) -> list:
    env = dict(os.environ)
    if package_root: env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    toy = Path(__file__).resolve().parents[2] / "toy"  # the same reference programs for both checkouts
    done = subprocess.run([sys.executable, "-c", WORKER, str(tasks_dir), str(per_task), str(toy)], env=env, cwd="/",
                          capture_output=True, text=True, check=False)
    if done.returncode != 0: sys.exit(f"error: predicting with {package_root or 'this clone'} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="a folder holding the other commit's wmrl package and toy/")
    parser.add_argument("--per-task", type=int, default=300, help="programs sampled per suite task")
    parser.add_argument("--tasks-dir", type=Path, default=Path.home() / ".cache/wmrl/tasks", help="the built suite")
    args = parser.parse_args(argv)
    if not (Path(args.old) / "wmrl" / "__init__.py").is_file(): sys.exit(f"error: {args.old}/wmrl is not a package; see --help")
    if not args.tasks_dir.is_dir(): sys.exit(f"error: no suite at {args.tasks_dir}; build it with `wmrl tasks build`")
    here = str(Path(__file__).resolve().parents[2])
    new, old = predictions(here, args.tasks_dir, args.per_task), predictions(args.old, args.tasks_dir, args.per_task)
    suite = [(a, b) for a, b in zip(new, old) if a[0].startswith("suite:")]
    grid = [(a, b) for a, b in zip(new, old) if not a[0].startswith("suite:")]
    for label, pairs in (("reference suites", suite), ("generator", grid)):
        differ = [(a, b) for a, b in pairs if a != b]
        print(f"{label}: {len(pairs)} programs on {len({a[0] for a, _ in pairs})} tasks; {len(differ)} predictions differ")
        for a, b in differ[:10]: print(f"  {a[0]} {a[1]}: now {a[2:]} , before {b[2:]}")
    honest_failing = [a for a, _ in suite if a[1].endswith("(really ok)") and a[2] != "ok"]
    print(f"honest reference programs (really ok) predicted to fail: {len(honest_failing)} of {sum(a[1].endswith('(really ok)') for a, _ in suite)}")
    for a in honest_failing: print(f"  {a[0]} {a[1]}: {a[2:]}")
    return int(any(a != b for a, b in zip(new, old)) or len(new) != len(old) or bool(honest_failing))


if __name__ == "__main__":
    sys.exit(main())
