"The static tier against real sandbox records of the iris solutions, and against hostile code."
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.world_model.static import StaticWorldModel, static_verdicts
from wmrl.world_model.verdicts import CHECKS, check_for_outcome, error_type_of

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "toy/tasks/iris"
SOLUTIONS = ROOT / "toy/solutions/iris"
assert TASK.is_dir(), "the committed task toy/tasks/iris is missing"  # a deletion fails here, it does not skip


def real_outcomes():
    records = json.loads((SOLUTIONS / "records.json").read_text())
    out = {}
    for name, record in records.items():
        error_type = error_type_of(record["stderr_tail"] or record["message"])
        out[name] = (record["status"], check_for_outcome(record["status"], error_type))
    return out


def test_records_cover_every_check_type():
    owners = {check for _, check in real_outcomes().values()}
    assert set(CHECKS) <= owners  # good runs own 'quality'; each failure check owns at least one real failure


def test_static_recall_targets_on_real_records():
    model = StaticWorldModel()
    outcomes = real_outcomes()
    hits, totals = {}, {}
    for name, (_status, owner) in outcomes.items():
        if owner in (None, "quality"): continue
        verdicts = {v.check: v for v in static_verdicts(TASK, (SOLUTIONS / f"{name}.py").read_text())}
        totals[owner] = totals.get(owner, 0) + 1
        hits[owner] = hits.get(owner, 0) + (verdicts[owner].failed and verdicts[owner].confidence >= model.min_confidence)
    recall = {c: hits[c] / totals[c] for c in totals}
    for check in ("imports_names", "data_refs", "submission"):
        assert recall[check] >= 0.9, recall


def test_good_solutions_are_predicted_ok():
    model = StaticWorldModel()
    for name, (status, _) in real_outcomes().items():
        if status != "ok": continue
        prediction = model.predict([(TASK, (SOLUTIONS / f"{name}.py").read_text())])[0]
        assert prediction.status == "ok", (name, prediction.deciding_check, prediction.feedback)


HOSTILE = [
    "", "\x00", "x = (" * 200 + ")" * 200, "(" * 5000, "import os\nos.system('rm -rf /')\n", "def f():\n    return f()\nf()\n",
    "exec('import pandas')\n", "__import__('torch')\n", "from . import x\n", "import pandas as pd\npd.read_csv(1, 2, 3)\n",
    "a = b = c = 1\na[0][1][2] = 3\n", "while 1:\n  break\n", "for x in range(10**12):\n  pass\n",
    "class A:\n  def fit(self): pass\nA().fit()\n", "import numpy as np\nnp.zeros(-1)\n", "lambda: (yield)\n",
    "import sys\nsys.setrecursionlimit(10)\n", "x = [1] * 10**12\n", "import os\nos.environ['DATA_DIR'][5]\n",
    "1 + " * 3000 + "1\n", "import pandas as pd\ndf = pd.DataFrame({1: [1]})\ndf.to_csv(None)\n",
]


@pytest.mark.parametrize("code", HOSTILE)
def test_hostile_code_never_crashes_and_is_not_executed(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    verdicts = static_verdicts(TASK, code)
    assert [v.check for v in verdicts] == list(CHECKS)
    prediction = StaticWorldModel().predict([(TASK, code)])[0]
    assert 0.0 <= prediction.score <= 1.0
    assert list(tmp_path.iterdir()) == []  # nothing was run or written


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([
    "import pandas as pd", "import os", "from sklearn.linear_model import LogisticRegression", "m = LogisticRegression(C=1)",
    "df = pd.read_csv(os.path.join(os.environ['DATA_DIR'], 'train.csv'))", "df = df.drop(columns=['id'])", "x = df['species']",
    "m.fit(df, x)", "p = m.predict_proba(df)", "out = pd.DataFrame(p)", "out.to_csv(os.environ['SUBMISSION_PATH'])",
    "for i in range(3):", "    pass", "if x:", "try:", "except Exception:", "y = 1 / 0", "del df", "z = undefined_name"]),
    max_size=14))
def test_random_statement_soups_never_crash(lines):
    code = "\n".join(lines) + "\n"
    for v in static_verdicts(TASK, code):
        assert v.verdict in ("pass", "fail") and 0 <= v.confidence <= 1
