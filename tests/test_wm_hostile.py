"""The static world model against programs a learning policy could write to fool or break it (issue 24, breaches 1 and 10).

The world model only reads a program; it must never import or run anything the program names, and one program may
only ever get its own verdict. Where the real outcome is decidable (an exit, an endless loop), the prediction is
checked against a real cold execution in the bwrap sandbox. On commit 5916ecf (before the fix) 21 of these 22 cases
fail (`raise SystemExit('stop')` was already a failure):
`PYTHONPATH=<git archive 5916ecf wmrl> pytest tests/test_wm_hostile.py`.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wmrl.adapters.task_scorer import TaskScorer
from wmrl.execution.backends import bwrap_works
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.sandbox import execute
from wmrl.execution.tasks import load_task
from wmrl.world_model.prior import load_prior
from wmrl.world_model.prompts import build_prefix
from wmrl.world_model.static import StaticWorldModel

REPO = Path(__file__).resolve().parents[1]
GOOD = (REPO / "toy/solutions/iris/good_logistic.py").read_text()
HEAD, BODY = GOOD.split("DATA_DIR = ", 1)
BODY = "DATA_DIR = " + BODY


@pytest.fixture(scope="module")
def iris():
    return load_task(REPO / "toy/tasks/iris")


def after_imports(line: str) -> str:
    "The clean solution with `line` inserted after its imports (before it reads any data)."
    return HEAD + line + "\n" + BODY


def predict(task, code: str):
    return StaticWorldModel().predict([(task, code)])[0]


# ---- breach 1: the world model runs host code named by the program ----------------------------------------------

def run_isolated(code: str, cwd: Path) -> subprocess.CompletedProcess:
    "Predict `code` in a fresh interpreter whose working folder is `cwd` (where a virtualenv would appear)."
    script = ("import sys\nfrom pathlib import Path\nfrom wmrl.execution.tasks import load_task\n"
              "from wmrl.world_model.static import StaticWorldModel\n"
              f"task = load_task(Path({str(REPO / 'toy/tasks/iris')!r}))\n"
              f"p = StaticWorldModel().predict([(task, {code!r})])[0]\n"
              "print('STATUS', p.status, p.error_type)\n"
              "print('IMPORTED', sorted(m for m in sys.modules if m.endswith('__main__') and m != '__main__'))\n")
    paths = [p for p in (os.environ.get("PYTHONPATH", ""), str(REPO)) if p]  # the wmrl under test comes first
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("statement", ["import venv.__main__.x", "import unittest.__main__.x",
                                       "from numpy.f2py.__main__ import main"])
def test_an_import_is_looked_up_never_run(statement, tmp_path):
    "`import venv.__main__.x` used to turn the working folder into a virtualenv; `unittest.__main__` raised SystemExit."
    before = sorted(tmp_path.iterdir())
    result = run_isolated(after_imports(statement), tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(tmp_path.iterdir()) == before  # nothing created where the host process runs
    assert "IMPORTED []" in result.stdout  # no __main__ module was executed
    status = result.stdout.split("STATUS ", 1)[1].splitlines()[0].split()
    if statement.endswith(".x"):  # the parent is a module, not a package: Python would raise ModuleNotFoundError
        assert status == ["runtime_error", "ModuleNotFoundError"]


def test_one_unparseable_program_cannot_take_the_batch_down(iris):
    "A 100 KB expression makes Python's parser raise MemoryError: only its own row fails, as it would when run."
    nested = "x = " + "-" * 100_000 + "1\n"
    jobs = [(iris, GOOD), (iris, after_imports(nested)), (iris, GOOD)]
    alone = predict(iris, GOOD)
    predictions = StaticWorldModel().predict(jobs)
    assert predictions[0] == alone and predictions[2] == alone
    assert predictions[1].status == "runtime_error" and predictions[1].error_type in ("MemoryError", "RecursionError")


def test_a_system_exit_inside_the_analysis_stays_in_its_row(iris, monkeypatch):
    "Whatever the analysis raises (SystemExit included) becomes that row's failure; the scorer keeps going."
    import wmrl.world_model.static as static
    real = static.analyse

    def analyse(task, code):
        if "boom" in code: raise SystemExit(3)
        return real(task, code)
    monkeypatch.setattr(static, "analyse", analyse)
    scorer = TaskScorer({"iris": iris}, StaticWorldModel(), program=lambda text: text)
    rows = [{"task_id": "iris", "completion": GOOD}, {"task_id": "iris", "completion": GOOD + "# boom\n"}]
    rewards = scorer.predict(rows)
    assert rewards[0] > 0.5 and rewards[1] == pytest.approx(0.1)  # the ladder's runtime_error


def test_too_long_a_program_is_predicted_to_fail(iris):
    code = GOOD + "# padding\n" * 30_000
    assert predict(iris, code).status == "runtime_error"


# ---- breach 10: programs that stop early or do nothing --------------------------------------------------------------

EARLY = {  # program -> (predicted status, error type), all of which the old model scored as a valid submission
    "os_exit_1": (after_imports("os._exit(1)"), "runtime_error", "SystemExit"),
    "sys_exit_2": (after_imports("import sys\nsys.exit(2)"), "runtime_error", "SystemExit"),
    "raise_system_exit_message": (after_imports("raise SystemExit('stop')"), "runtime_error", "SystemExit"),
    "clean_exit_before_writing": (after_imports("import sys\nsys.exit(0)"), "no_submission", "SubmissionNotFoundError"),
    "exec_a_string": (after_imports("exec('import os; os._exit(1)')"), "runtime_error", "RuntimeError"),
    "getattr_computed": (after_imports("import time\nname = os.environ.get('X', 'sl') + 'eep'\ngetattr(time, name)(10_000)"),
                         "runtime_error", "RuntimeError"),
    "assert_false_comparison": (after_imports("n = 3\nassert n < 0"), "runtime_error", "AssertionError"),
    "assert_undecidable": (after_imports("assert os.getpid() < 0"), "runtime_error", "AssertionError"),
    "endless_iterator": (after_imports("import itertools\nfor _ in itertools.count():\n    pass"), "timeout", "TimeoutError"),
}


@pytest.mark.parametrize("name", sorted(EARLY))
def test_early_stops_are_predicted(iris, name):
    code, status, error_type = EARLY[name]
    prediction = predict(iris, code)
    assert (prediction.status, prediction.error_type) == (status, error_type)


def test_a_sleep_built_from_pieces_is_charged(iris):
    prediction = predict(iris, after_imports("import time\ngetattr(time, 'sl' + 'eep')(100_000)"))
    assert prediction.status == "timeout"


def test_tuning_whose_result_is_thrown_away_is_not_tuning(iris):
    from wmrl.world_model.static import analyse
    thrown = after_imports("from sklearn.model_selection import cross_val_score\n"
                           "cross_val_score(LogisticRegression(), [[0]], [0])\nscores = cross_val_score(LogisticRegression(), [[0]], [0])")
    used = thrown + "\nprint(scores.mean())"
    assert not analyse(iris, thrown).tuned and analyse(iris, used).tuned


def test_llm_tiers_see_the_tail_of_a_long_program(iris):
    "A crash after 32 KB of comments was invisible to the LLM tiers: the prompt now shows the head and the tail."
    code = GOOD + "# filler\n" * 5_000 + "import os\nos._exit(1)\n"
    prefix = build_prefix(iris, code)
    assert "os._exit(1)" in prefix and "not shown" in prefix and prefix.count("# filler") < 4_000


@pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot create namespaces here (CI runs it)")
@pytest.mark.parametrize("name", ["os_exit_1", "sys_exit_2", "clean_exit_before_writing", "assert_false_comparison"])
def test_the_prediction_matches_a_real_run(iris, name):
    "Where the outcome is decidable, the world model's status is the sandbox's."
    code, status, _ = EARLY[name]
    record = execute(iris, code, backend="bwrap", limits=SandboxLimits(wall_s=60, memory_mb=1024))
    assert record.status == status == predict(iris, code).status


# ---- issue 44, item 4: exits, signals and sleeps the walk could not place ---------------------------------------------
# Each really scores 0.1 (run in bwrap below); on 8e6b3db every one was predicted ok (0.725 with the hand prior, 0.875
# with the fitted one): `PYTHONPATH=<git archive 8e6b3db wmrl toy> pytest tests/test_wm_hostile.py -k indirect`.

INDIRECT = {  # program (after the clean solution's imports) -> the real status
    "exit_through_map": ("import sys\nlist(map(sys.exit, [1]))", "runtime_error"),
    "exit_through_a_dict": ("actions = {'stop': os._exit}\nactions['stop'](1)", "runtime_error"),
    "exit_in_a_timer": ("import threading\nthreading.Timer(0.5, os._exit, [1]).start()", "runtime_error"),
    "exit_in_atexit": ("import atexit\natexit.register(os._exit, 1)", "runtime_error"),
    "exit_in_a_finaliser": ("class Guard:\n    def __del__(self):\n        os._exit(1)\nguard = Guard()", "runtime_error"),
    "kill_itself": ("import signal\nos.kill(os.getpid(), signal.SIGKILL)", "runtime_error"),
    "alarm": ("import signal, time\nsignal.alarm(1)\ntime.sleep(2)", "runtime_error"),
    "unbounded_recursion": ("def descend(n):\n    return descend(n + 1)\ndescend(0)", "runtime_error"),
    "environ_pop": ("os.environ.pop('DATA_DIR')", "runtime_error"),
    "builtins_open": ("import builtins\nbuiltins.open = None", "runtime_error"),
    "sleep_under_an_alias": ("from time import sleep as nap\nnap(60 * 60)", "timeout"),
    "sleep_through_getattr_on_an_alias": ("import time as clock\ngetattr(clock, 'sleep')(60 * 60)", "timeout"),
}


@pytest.mark.parametrize("name", sorted(INDIRECT))
def test_indirect_exits_signals_and_sleeps_are_predicted_to_fail(iris, name):
    line, status = INDIRECT[name]
    for model in (StaticWorldModel(), StaticWorldModel(quality_prior=load_prior())):
        prediction = model.predict([(iris, after_imports(line))])[0]
        assert (prediction.status, prediction.score) == (status, pytest.approx(0.1)), (name, prediction.status, prediction.feedback)


INDIRECT_VARIANTS = [  # the same breaches written another way
    "import atexit\natexit.register(lambda: os._exit(1))", "import threading\nthreading.Thread(target=os._exit, args=(1,)).start()",
    "import signal\nsignal.raise_signal(signal.SIGTERM)", "import signal\nsignal.setitimer(signal.ITIMER_REAL, 0.5)",
    "del os.environ['SUBMISSION_PATH']", "os.environ.clear()", "setattr(os.path, 'join', None)", "__builtins__.open = None",
    "import time\nlist(map(time.sleep, [3600]))", "def spin():\n    x = 1\n    spin()\nspin()",
]


@pytest.mark.parametrize("line", INDIRECT_VARIANTS)
def test_indirect_variants_are_predicted_to_fail(iris, line):
    prediction = predict(iris, after_imports(line))
    assert prediction.status in ("runtime_error", "timeout"), (line, prediction.status)


HONEST_LOOKALIKES = [  # near misses an honest program writes: none of them may move the prediction
    after_imports(line) for line in (
        "import signal\nsignal.alarm(0)", "import time\ntime.sleep(0.5)", "exit_codes = {'ok': 0}",
        "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nfib(10)", "os.environ['OMP_NUM_THREADS'] = '1'",
        "class Scaler:\n    def fit(self, X):\n        return self\nScaler().fit(None)", "import sys\nsys.setrecursionlimit(10_000)",
        "class Base:\n    def fit(self, X):\n        assert X is not None\n        raise NotImplementedError")
] + [GOOD.replace('DATA_DIR = os.environ["DATA_DIR"]', 'DATA_DIR = os.environ.pop("DATA_DIR")')]  # pop reads it once


@pytest.mark.parametrize("code", HONEST_LOOKALIKES)
def test_honest_lookalikes_keep_the_clean_prediction(iris, code):
    assert "os.environ.pop" in HONEST_LOOKALIKES[-1]
    clean = predict(iris, GOOD)
    prediction = predict(iris, code)
    assert (prediction.status, prediction.score) == (clean.status, clean.score), prediction.feedback


@pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot create namespaces here (CI runs it)")
@pytest.mark.parametrize("name", sorted(n for n, (_, status) in INDIRECT.items() if status == "runtime_error"))
def test_the_indirect_programs_really_fail(iris, name):
    "They really score 0.1 cold (the two sleeps are left out: each would hold the sandbox for its whole wall clock)."
    line, status = INDIRECT[name]
    record = execute(iris, after_imports(line), backend="bwrap", limits=SandboxLimits(wall_s=60, memory_mb=1024))
    assert (record.status, record.reward) == (status, pytest.approx(0.1)), (name, record.message)
