"""MLE-Dojo adapter and its environment (wmrl.adapters.mledojo, wmrl.adapters.kaggle_env) on REAL board shapes: a
mini competition in MLE-Dojo's prepared layout (breast_cancer data, AUC) carrying the real random-acts-of-pizza
Kaggle boards (462 teams, leaked 1.0 scores on top), read at test time from ../shared/data/mle-dojo and copied only
into a temporary folder.

Checks: the loader's layout variants and errors, the env's 2-tuple contract and observation keys, MLE-Dojo's
feedback templates, positions recomputed by hand from the CSV, history and archives, and the paper's split.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wmrl.adapters.kaggle_env import KaggleEnv, board_position, make_env, mledojo_available
from wmrl.adapters.mledojo import (
    COMPETITION_METRICS,
    PAPER_HELDOUT,
    PAPER_TRAIN,
    build_mini_competition,
    cli_mledojo,
    load_competition,
)
from wmrl.execution.tasks import TaskError

DOJO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "mle-dojo"
if not (DOJO / "competitions").is_dir():
    pytest.skip(f"REAL LEADERBOARD TESTS SKIPPED: {DOJO} is absent (the shared MLE-Dojo data folder)",
                allow_module_level=True)
PIZZA = DOJO / "competitions" / "random-acts-of-pizza"
HIGHER = json.loads((DOJO / "higher_is_better.json").read_text())

OBS_KEYS = {"action_status", "feedback", "current_raw_score", "current_position_score", "best_raw_score",
            "best_position_score", "history_summary"}

GOOD = """import os
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
data = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(data, "train.csv"))
test = pd.read_csv(os.path.join(data, "test.csv"))
X = [c for c in train.columns if c not in ("id", "target")]
model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(train[X], train["target"])
pd.DataFrame({"id": test["id"], "target": model.predict_proba(test[X])[:, 1]}).to_csv(os.environ["SUBMISSION_PATH"], index=False)
"""
# a deliberately weak model: one feature, so the AUC lands in the middle of the board rather than at the top
WEAK = GOOD.replace('X = [c for c in train.columns if c not in ("id", "target")]', 'X = ["f19"]')
CRASH = 'import os\nimport pandas as pd\ntrain = pd.read_csv(os.environ["DATA_DIR"] + "/train.csv")\nx = 1 / 0\n'


@pytest.fixture(scope="module")
def competition(tmp_path_factory):
    root = tmp_path_factory.mktemp("dojo")
    build_mini_competition(root, board_source=PIZZA)
    return load_competition(root, "breast-cancer-mini", info_root=DOJO)


def feedback(obs):
    return obs["feedback"]["base"]["feedback"]


def by_hand(score, path, higher=True):
    "MLE-Dojo's rule, from the CSV: first 1-based index (best first) that the score ties or beats."
    board = pd.read_csv(path)["score"].to_numpy(dtype=float)
    board = np.sort(board)[::-1] if higher else np.sort(board)
    beats = [i for i, s in enumerate(board, 1) if (score >= s if higher else score <= s)]
    return (beats[0] if beats else len(board) + 1), len(board)


def test_loader_reads_prepared_layout(competition):
    assert competition.root.name == "data" and competition.public_dir.name == "public"
    assert competition.board_dir == competition.root / "private"
    assert (competition.metric, competition.higher_is_better) == ("roc_auc", True)
    assert (competition.id_column, competition.target_columns) == ("id", ("target",))
    assert len(competition.private_leaderboard()) == len(pd.read_csv(PIZZA / "private_leaderboard.csv")) == 462


def test_loader_variants_and_errors(tmp_path):
    comp = build_mini_competition(tmp_path, name="random-acts-of-pizza", board_source=PIZZA)
    (comp / "wmrl.json").unlink()
    assert load_competition(tmp_path, "random-acts-of-pizza", info_root=DOJO).metric == "roc_auc"
    with pytest.raises(TaskError, match="higher_is_better.json"):
        load_competition(tmp_path, "random-acts-of-pizza", metric="rmse", info_root=DOJO)
    # boards kept outside the competition (the shared info folder itself)
    for board in ("public", "private"):
        (comp / "data" / "private" / f"{board}_leaderboard.csv").unlink()
    with pytest.raises(TaskError, match="no public_leaderboard.csv"):
        load_competition(tmp_path, "random-acts-of-pizza", info_root=DOJO)
    loaded = load_competition(tmp_path, "random-acts-of-pizza", leaderboard_dir=DOJO, info_root=DOJO)
    assert loaded.board_dir == PIZZA
    # without the data/ level
    flat = tmp_path / "nodata"
    shutil.copytree(comp / "data", flat / "x")
    (flat / "x" / "private" / "public_leaderboard.csv").write_text("rank,score\n1,0.9\n")
    (flat / "x" / "private" / "private_leaderboard.csv").write_text("rank,score\n1,0.9\n2,0.8\n")
    assert load_competition(flat, "x", metric="roc_auc", info_root=DOJO).root == flat / "x"
    # unknown metric, missing answers, broken board, answers next to public data
    with pytest.raises(TaskError, match="unknown metric"):
        load_competition(flat, "x", metric="auc_typo", info_root=DOJO)
    (flat / "x" / "private" / "test_answer.csv").unlink()
    with pytest.raises(TaskError, match="test_answer.csv"):
        load_competition(flat, "x", metric="roc_auc", info_root=DOJO)
    with pytest.raises(TaskError, match="no kit metric known"):
        load_competition(flat, "x", info_root=DOJO)
    bad = tmp_path / "bad"
    shutil.copytree(comp, bad / "random-acts-of-pizza")
    (bad / "random-acts-of-pizza" / "info").mkdir()
    (bad / "random-acts-of-pizza" / "info" / "public_leaderboard.csv").write_text("rank,score\n1,abc\n")
    (bad / "random-acts-of-pizza" / "info" / "private_leaderboard.csv").write_text("rank,score\n1,0.5\n")
    with pytest.raises(TaskError, match="non-numeric"):
        load_competition(bad, "random-acts-of-pizza", info_root=DOJO)
    dsbench = tmp_path / "ds" / "task"
    dsbench.mkdir(parents=True)
    for name in ("train.csv", "test.csv", "sample_submission.csv", "test_answer.csv"):
        (dsbench / name).write_text("id,target\n1,0\n")
    with pytest.raises(TaskError, match="solutions cannot read the answers"):
        load_competition(tmp_path / "ds", "task", metric="roc_auc")


def test_env_contract_feedback_and_positions(competition, tmp_path):
    env = KaggleEnv(competition, output_dir=tmp_path)
    result = env.step("request_info", info_type="overview")
    assert isinstance(result, tuple) and len(result) == 2
    obs, reward = result
    assert set(obs) == OBS_KEYS and reward == 0.0 and obs["action_status"] == "SUCCESS"
    assert feedback(obs).startswith("=== Competition Info ===") and "Breast-cancer diagnosis" in feedback(obs)

    obs, reward = env.step("execute_code", code=CRASH)
    assert (obs["action_status"], reward) == ("FAILED", 0.0)
    text = feedback(obs)
    assert text.startswith("=== Code Execution Results ===\nExecution failed: Traceback (most recent call last):")
    assert "ZeroDivisionError: division by zero" in text and 'File "solution.py", line 4' in text
    assert obs["best_position_score"] is None and obs["best_raw_score"] is None

    weak_obs, weak_reward = env.step("execute_code", code=WEAK)
    good_obs, good_reward = env.step("execute_code", code=GOOD)
    for obs, reward in ((weak_obs, weak_reward), (good_obs, good_reward)):
        text = feedback(obs)
        assert "Execution successful" in text and "=== Submission Evaluation ===\nSubmission successful" in text
        raw = obs["current_raw_score"]
        expected = []
        for board in ("private", "public"):
            p, n = by_hand(raw, PIZZA / f"{board}_leaderboard.csv")
            assert f"{board.capitalize()} Leaderboard: Position {p} / {n}" in text
            expected.append((n - p + 1) / n)
        assert reward == pytest.approx(np.mean(expected), abs=1e-12)
        assert f"Average Position Score: {reward:.4f}" in text
        assert obs["current_position_score"] == reward
    assert 0 < weak_reward < good_reward <= 1  # the weak model sits lower on the real board
    assert good_obs["best_position_score"] == good_reward
    assert good_obs["best_raw_score"] == good_obs["current_raw_score"]
    assert env.total_reward == pytest.approx(weak_reward + good_reward)

    # a worse submission afterwards: current drops, best stays
    obs, reward = env.step("execute_code", code=WEAK)
    assert obs["current_position_score"] == pytest.approx(weak_reward) and obs["best_position_score"] == good_reward
    assert f"Best Position Score: {good_reward}" in feedback(obs)

    history = env.get_history()
    assert [h["action"] for h in history] == ["request_info"] + ["execute_code"] * 4
    assert [h["record"]["status"] for h in history[1:]] == ["runtime_error", "ok", "ok", "ok"]
    assert obs["history_summary"] == "Total Actions: 5, Last Action: execute_code"
    saved = json.loads((tmp_path / "env_history" / "history.json").read_text())
    assert saved["best_code"] == GOOD and saved["step_count"] == 5
    assert (tmp_path / "execution_4.py").read_text() == GOOD


def test_env_submission_errors_and_validation(competition):
    env = KaggleEnv(competition)
    obs, reward = env.step("execute_code", code="print('no file')\n")
    assert reward == 0.0 and "Execution successful" in feedback(obs) and "Code output: no file" in feedback(obs)
    assert "Submission error (SubmissionNotFoundError)" in feedback(obs)
    bad = "import os\nopen(os.environ['SUBMISSION_PATH'], 'w').write('id,target\\n1,0.5\\n')\n"
    obs, reward = env.step("execute_code", code=bad)
    assert "Submission error (InvalidSubmissionError): submission has 1 rows but the test set has 171" in feedback(obs)
    obs, reward = env.step("execute_code", code="def f(:\n  pass\n")
    assert feedback(obs).endswith("SyntaxError: invalid syntax") and env.last_record.status == "syntax_error"
    obs, reward = env.step("validate_code", code=GOOD)
    assert (obs["action_status"], reward) == ("SUCCESS", 0.0) and obs["best_position_score"] is None  # not graded
    obs, reward = env.step("validate_code", code=CRASH)
    assert obs["action_status"] == "FAILED" and "Runtime check failed" in feedback(obs)
    obs, _ = env.step("request_info", info_type="private_answers")
    assert obs["action_status"] == "FAILED"
    with pytest.raises(ValueError, match="invalid action"):
        env.step("submit")
    with pytest.raises(ValueError, match="needs code"):
        env.step("validate_code", code="   ")
    obs, info = env.reset()
    assert info == {} and env.get_history() == [] and obs["total_reward"] == 0.0


def test_env_rejects_non_tasks():
    with pytest.raises(TypeError, match="kit Task"):
        KaggleEnv("some/path")


def test_make_env_falls_back_without_mledojo(competition):
    if mledojo_available():
        pytest.skip("the real mledojo package is installed here; the fallback is not exercised")
    assert isinstance(make_env(competition), KaggleEnv)
    with pytest.raises(ImportError, match="not importable"):
        make_env(competition, use_mledojo=True)


def test_board_position_matches_by_hand_on_real_boards():
    rng = np.random.default_rng(0)
    for name in ("random-acts-of-pizza", "afsis-soil-properties", "GiveMeSomeCredit"):
        higher = HIGHER[name]
        path = DOJO / "competitions" / name / "private_leaderboard.csv"
        board = pd.read_csv(path)["score"].to_numpy(dtype=float)
        for score in [*rng.choice(board, 5), board.min() - 1, board.max() + 1, np.median(board)]:
            assert board_position(score, board, higher) == by_hand(score, path, higher), (name, score)


def test_paper_split_exists_in_shared_data():
    names = set(HIGHER)
    assert len(PAPER_TRAIN) == 45 and set(PAPER_TRAIN) <= names
    assert len(PAPER_HELDOUT) == 14 and set(PAPER_HELDOUT) <= names
    assert not set(PAPER_TRAIN) & set(PAPER_HELDOUT)
    readme = (DOJO / "README.md").read_text()
    for name in [*PAPER_TRAIN, *PAPER_HELDOUT]:
        assert name in readme


def test_metric_map_agrees_with_mledojo_direction():
    from wmrl.execution.grading import get_metric
    for name, metric in COMPETITION_METRICS.items():
        assert name in HIGHER, name
        assert HIGHER[name] == get_metric(metric).higher_is_better, (name, metric)


def test_cli_check(competition, capsys):
    root = str(competition.root.parent.parent)
    assert cli_mledojo(["check", root, "breast-cancer-mini"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report[0]["ok"] and report[0]["boards"] == [462, 462]
    assert cli_mledojo(["check", root, "missing"]) == 1
