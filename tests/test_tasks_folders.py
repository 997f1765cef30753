"""Task folders: validation of broken folders, write/load round trips for every metric kind, reference
leaderboards checked against direct computation, determinism, the shipped iris task and the CLI."""
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.model_selection import train_test_split

from wmrl.execution.grading import METRICS, grade_submission_file, leaderboard_position
from wmrl.execution.task_builder import REFERENCE_MODELS, build_iris_task, cli_tasks, reference_leaderboard, write_task
from wmrl.execution.tasks import Task, TaskError, TaskFrames, load_suite, load_task, read_leaderboard

ROOT = Path(__file__).resolve().parent.parent
IRIS = ROOT / "toy" / "tasks" / "iris"


@pytest.fixture()
def iris_copy(tmp_path) -> Path:
    target = tmp_path / "iris"
    shutil.copytree(IRIS, target)
    return target


def _edit_json(root: Path, **changes) -> None:
    meta = json.loads((root / "task.json").read_text())
    meta.update(changes)
    (root / "task.json").write_text(json.dumps(meta))


# ---------------------------------------------------------------- the shipped task

def test_shipped_iris_loads():
    task = load_task(IRIS)
    assert isinstance(task, Task)
    assert (task.name, task.metric, task.higher_is_better, task.category) == ("iris", "log_loss", False, "multiclass")
    assert task.id_column == "id" and task.target_columns == ("setosa", "versicolor", "virginica")
    assert task.compute_budget_s == 60.0
    assert "log loss" in task.description.lower()
    assert task.public_dir == IRIS / "public" and task.info_dir == IRIS / "info"
    assert len(pd.read_csv(task.answer_path)) == 60
    assert len(task.private_leaderboard()) >= 50 and len(task.public_leaderboard()) >= 50
    assert sum(p.stat().st_size for p in IRIS.rglob("*") if p.is_file()) < 50_000


def test_shipped_iris_equals_a_fresh_build(tmp_path):
    fresh = build_iris_task(tmp_path)
    files = sorted(p.relative_to(IRIS) for p in IRIS.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(fresh.root) for p in fresh.root.rglob("*") if p.is_file())
    for rel in files:
        if rel.parts[0] == "info":
            np.testing.assert_allclose(read_leaderboard(IRIS / rel), read_leaderboard(fresh.root / rel), rtol=1e-7, atol=1e-12)
        else:
            assert (IRIS / rel).read_bytes() == (fresh.root / rel).read_bytes(), rel


def test_iris_ids_do_not_leak_the_label():
    # iris is sorted by species; ids are assigned after a seeded shuffle, so id order must not follow species
    train = pd.read_csv(IRIS / "public" / "train.csv").sort_values("id")
    codes = train["species"].astype("category").cat.codes.to_numpy()
    assert np.mean(np.diff(codes) != 0) > 0.3
    assert "species" not in pd.read_csv(IRIS / "public" / "test.csv").columns


def test_iris_sample_submission_scores_ln3_and_answers_score_best(tmp_path):
    task = load_task(IRIS)
    assert grade_submission_file(task, task.sample_submission_path).raw_score == pytest.approx(np.log(3))
    perfect = grade_submission_file(task, task.answer_path)
    assert perfect.status == "ok"
    assert leaderboard_position(perfect.raw_score, task.private_leaderboard(), False) == 1.0


def test_load_suite(tmp_path):
    assert [t.name for t in load_suite(ROOT / "toy" / "tasks")] == ["iris"]
    with pytest.raises(TaskError, match="no task folders"):
        load_suite(tmp_path)
    with pytest.raises(TaskError, match="suite folder not found"):
        load_suite(tmp_path / "nope")


# ---------------------------------------------------------------- broken folders

@pytest.mark.parametrize("rel", ["task.json", "public/train.csv", "public/test.csv", "public/sample_submission.csv",
                                 "public/description.txt", "private/test_answer.csv", "info/public_leaderboard.csv",
                                 "info/private_leaderboard.csv"])
def test_every_missing_file_is_named(iris_copy, rel):
    (iris_copy / rel).unlink()
    with pytest.raises(TaskError, match=f"missing file: .*{Path(rel).name}"):
        load_task(iris_copy)


@pytest.mark.parametrize("content, message", [
    ("{not json", "bad JSON"),
    ("[1, 2]", "must hold a JSON object"),
    (b"\xff\xfe\x00garbage", "bad JSON"),
])
def test_bad_task_json(iris_copy, content, message):
    path = iris_copy / "task.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(TaskError, match=message):
        load_task(iris_copy)


@pytest.mark.parametrize("changes, message", [
    ({"metric": "auc"}, "unknown metric 'auc'"),
    ({"higher_is_better": True}, "contradicts metric 'log_loss'"),
    ({"higher_is_better": "no"}, "higher_is_better must be"),
    ({"compute_budget_s": "60"}, "compute_budget_s must be"),
    ({"compute_budget_s": True}, "compute_budget_s must be"),
    ({"compute_budget_s": -1}, "compute_budget_s must be > 0"),
    ({"category": "flowers"}, "unknown category 'flowers'"),
    ({"target_columns": []}, "non-empty list"),
    ({"target_columns": ["setosa", 3]}, "non-empty list"),
    ({"id_column": "row"}, r"id column\(s\) \['row'\] absent"),
    ({"target_columns": ["setosa", "rose"]}, r"id/target column\(s\) \['rose'\] absent"),
    ({"label_column": 3}, "label_column must be"),
])
def test_bad_metadata(iris_copy, changes, message):
    _edit_json(iris_copy, **changes)
    with pytest.raises(TaskError, match=message):
        load_task(iris_copy)


def test_missing_key_is_named(iris_copy):
    meta = json.loads((iris_copy / "task.json").read_text())
    del meta["id_column"]
    (iris_copy / "task.json").write_text(json.dumps(meta))
    with pytest.raises(TaskError, match=r"lacks key\(s\) \['id_column'\]"):
        load_task(iris_copy)


def test_leaderboards_must_have_rank_score_and_numbers(iris_copy):
    board = iris_copy / "info" / "private_leaderboard.csv"
    original = board.read_text()
    board.write_text(original.replace("rank,score", "teamId,score"))
    with pytest.raises(TaskError, match=r"lacks column\(s\) \['rank'\]"):
        load_task(iris_copy)
    board.write_text("rank,score\n1,good\n2,0.5\n")
    with pytest.raises(TaskError, match="1 non-numeric score"):
        load_task(iris_copy)
    board.write_text("rank,score\n")
    with pytest.raises(TaskError, match="no scores"):
        load_task(iris_copy)
    board.write_text("")
    with pytest.raises(TaskError, match="unreadable CSV"):
        load_task(iris_copy)


def test_row_counts_and_ids_must_agree(iris_copy):
    answer = pd.read_csv(iris_copy / "private" / "test_answer.csv")
    answer.iloc[:-2].to_csv(iris_copy / "private" / "test_answer.csv", index=False)
    with pytest.raises(TaskError, match="row counts differ: test.csv 60, sample_submission.csv 60, test_answer.csv 58"):
        load_task(iris_copy)
    answer.assign(id=answer["id"].iloc[0]).to_csv(iris_copy / "private" / "test_answer.csv", index=False)
    with pytest.raises(TaskError, match="duplicated ids"):
        load_task(iris_copy)


def test_read_leaderboard_keeps_missing_scores_as_nan(tmp_path):
    path = tmp_path / "board.csv"
    path.write_text("rank,score\n1,0.9\n2,\n3,0.7\n")
    np.testing.assert_array_equal(np.isnan(read_leaderboard(path)), [False, True, False])


# ---------------------------------------------------------------- writing tasks of every kind

def _split(data: pd.DataFrame, target: str, seed: int = 0):
    data = data.reset_index(drop=True).copy()
    data.insert(0, "id", np.arange(1000, 1000 + len(data)))
    train, test = train_test_split(data, test_size=0.3, random_state=seed)
    answer = test[["id", target]].reset_index(drop=True)
    return train.reset_index(drop=True), test.drop(columns=target).reset_index(drop=True), answer


@pytest.fixture(scope="module")
def cancer_frames():
    bunch = load_breast_cancer(as_frame=True)
    data = bunch.frame.iloc[:240, list(range(6)) + [-1]]  # a few features and rows keep it quick
    data.columns = [c.replace(" ", "_") for c in data.columns]
    return _split(data, "target")


@pytest.fixture(scope="module")
def diabetes_frames():
    bunch = load_diabetes(as_frame=True)
    return _split(bunch.frame, "target")


@pytest.mark.parametrize("metric", ["roc_auc", "log_loss", "accuracy", "f1_macro"])
def test_binary_task_round_trip(tmp_path, cancer_frames, metric):
    train, test, answer = cancer_frames
    higher = METRICS[metric].higher_is_better
    task = write_task(tmp_path, f"cancer_{metric}", train, test, answer, "Breast cancer.", metric, higher, "binary",
                      "id", ["target"])
    assert load_task(task.root) == task
    sample = grade_submission_file(task, task.sample_submission_path)
    perfect = grade_submission_file(task, task.answer_path)
    assert sample.status == perfect.status == "ok"
    assert perfect.position >= sample.position
    assert perfect.position > 0.9
    board = task.private_leaderboard()
    assert np.all(np.diff(board) <= 0) if higher else np.all(np.diff(board) >= 0)


@pytest.mark.parametrize("metric", ["rmse", "mae", "rmsle", "r2", "smape"])
def test_regression_task_round_trip(tmp_path, diabetes_frames, metric):
    train, test, answer = diabetes_frames
    higher = METRICS[metric].higher_is_better
    task = write_task(tmp_path, "diabetes", train, test, answer, "Diabetes progression.", metric, higher,
                      "regression", "id", ["target"])
    sample = pd.read_csv(task.sample_submission_path)
    assert sample["target"].nunique() == 1
    assert sample["target"].iloc[0] == pytest.approx(train["target"].mean(), abs=1e-6)
    assert grade_submission_file(task, task.answer_path).position == 1.0
    assert grade_submission_file(task, task.sample_submission_path).status == "ok"


def test_reference_mean_model_matches_direct_computation(diabetes_frames):
    train, test, answer = diabetes_frames
    frames = TaskFrames(train, test, answer, "rmse", "id", ("target",))
    boards = reference_leaderboard(frames, models=["mean"], seeds=(0,), public_fraction=1.0)
    direct = np.sqrt(np.mean((answer["target"] - train["target"].mean()) ** 2))
    assert boards["private"] == pytest.approx([direct])
    assert boards["public"] == pytest.approx([direct])  # public_fraction 1: the same rows


def test_reference_public_board_uses_a_fixed_subset(diabetes_frames):
    train, test, answer = diabetes_frames
    frames = TaskFrames(train, test, answer, "mae", "id", ("target",))
    half = reference_leaderboard(frames, models=["mean"], seeds=(0,), public_fraction=0.5, public_seed=3)
    rows = np.sort(np.random.default_rng(3).permutation(len(answer))[: round(0.5 * len(answer))])
    direct = np.mean(np.abs(answer["target"].to_numpy()[rows] - train["target"].mean()))
    assert half["public"] == pytest.approx([direct])
    again = reference_leaderboard(frames, models=["mean"], seeds=(0,), public_fraction=0.5, public_seed=3)
    np.testing.assert_array_equal(half["public"], again["public"])


def test_reference_population_size_and_names():
    assert len(REFERENCE_MODELS["classification"](0)) >= 15
    assert len(REFERENCE_MODELS["regression"](0)) >= 12
    with pytest.raises(ValueError, match="unknown reference model"):
        reference_leaderboard(load_task(IRIS), models=["svm"])


def test_write_task_is_deterministic(tmp_path, cancer_frames):
    train, test, answer = cancer_frames
    a = write_task(tmp_path / "a", "t", train, test, answer, "d", "roc_auc", True, "binary", "id", ["target"])
    b = write_task(tmp_path / "b", "t", train, test, answer, "d", "roc_auc", True, "binary", "id", ["target"])
    for path in sorted(p for p in a.root.rglob("*") if p.is_file()):
        assert path.read_bytes() == (b.root / path.relative_to(a.root)).read_bytes(), path


def test_write_task_rejects_contradictions(tmp_path, cancer_frames):
    train, test, answer = cancer_frames
    with pytest.raises(TaskError, match="contradicts"):
        write_task(tmp_path, "t", train, test, answer, "d", "rmse", True, "binary", "id", ["target"])
    with pytest.raises(ValueError, match="public and private"):
        write_task(tmp_path, "t", train, test, answer, "d", "roc_auc", True, "binary", "id", ["target"],
                   leaderboard_scores={"private": [0.9]})
    with pytest.raises(TaskError, match="not in train.csv"):
        write_task(tmp_path, "t", train.drop(columns="target"), test, answer, "d", "roc_auc", True, "binary", "id",
                   ["target"])


def test_no_numeric_features_gives_a_baseline_only_board(tmp_path):
    train = pd.DataFrame({"id": [1, 2, 3, 4], "text": ["a", "b", "c", "d"], "y": [1.0, 2.0, 3.0, 4.0]})
    test = pd.DataFrame({"id": [5, 6], "text": ["e", "f"]})
    answer = pd.DataFrame({"id": [5, 6], "y": [2.0, 3.0]})
    task = write_task(tmp_path, "words", train, test, answer, "d", "mae", False, "text", "id", ["y"])
    assert len(task.private_leaderboard()) == 2 * 6  # mean and median, for each of the 6 default seeds


def test_entries_that_cannot_be_fitted_are_left_out(tmp_path):
    # one positive among 10 training rows: the seeded 70 % subsamples that miss it cannot fit a classifier
    train = pd.DataFrame({"id": range(10), "x": np.arange(10.0), "y": [0] * 9 + [1]})
    test = pd.DataFrame({"id": range(100, 106), "x": [0.0, 1.0, 2.0, 8.0, 9.0, 9.5]})
    answer = pd.DataFrame({"id": range(100, 106), "y": [0, 0, 0, 0, 1, 1]})
    frames = TaskFrames(train, test, answer, "log_loss", "id", ("y",))
    boards = reference_leaderboard(frames, models=["logreg_C1.0"], public_fraction=1.0)
    subsample_has_positive = [9 in np.random.default_rng(s).permutation(10)[:7] for s in range(1, 6)]
    assert len(boards["private"]) == 1 + sum(subsample_has_positive)
    assert len(boards["private"]) < 6


# ---------------------------------------------------------------- command line

def test_cli_build_and_check(tmp_path, capsys, iris_copy):
    assert cli_tasks(["build", "--out", str(tmp_path / "suite")]) == 0
    built = json.loads(capsys.readouterr().out)["built"]
    assert Path(built[0]).name == "iris"
    (iris_copy / "public" / "test.csv").unlink()
    assert cli_tasks(["check", built[0], str(iris_copy)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report[0]["ok"] and report[0]["private_board"] >= 50
    assert not report[1]["ok"] and "test.csv" in report[1]["error"]
    with pytest.raises(SystemExit):
        cli_tasks(["frobnicate"])


# ---- public/ must not be a way into private/ or info/ (issue 11): every route a task builder could get wrong ----

def _public_is_a_link_to_the_root(root: Path) -> None:
    shutil.rmtree(root / "public")
    (root / "public").symlink_to(root)


def _public_holds_a_link_to_private(root: Path) -> None:
    (root / "public" / "extra").symlink_to(root / "private")


def _public_holds_a_link_to_the_answers(root: Path) -> None:
    (root / "public" / "answers.csv").symlink_to(root / "private" / "test_answer.csv")


def _public_holds_a_link_to_info(root: Path) -> None:
    (root / "public" / "boards").symlink_to(root / "info")


def _public_holds_a_hard_link_to_the_answers(root: Path) -> None:
    (root / "public" / "copy.csv").hardlink_to(root / "private" / "test_answer.csv")


@pytest.mark.parametrize("make, message", [
    (_public_is_a_link_to_the_root, "is a symbolic link"), (_public_holds_a_link_to_private, "must not reach private"),
    (_public_holds_a_link_to_the_answers, "must not reach private"), (_public_holds_a_link_to_info, "must not reach private"),
    (_public_holds_a_hard_link_to_the_answers, "hard link"),
])
def test_public_must_not_expose_private_or_info(iris_copy, capsys, make, message):
    make(iris_copy)
    with pytest.raises(TaskError, match=message):
        load_task(iris_copy)
    assert cli_tasks(["check", str(iris_copy)]) == 1
    assert message.split()[-1] in capsys.readouterr().out


def test_a_harmless_link_inside_public_is_fine(iris_copy):
    (iris_copy / "public" / "train_again.csv").symlink_to(iris_copy / "public" / "train.csv")
    load_task(iris_copy)


@pytest.mark.parametrize("bad", ["-inf", "inf"])
def test_leaderboards_must_be_finite(iris_copy, bad):
    board = iris_copy / "info" / "private_leaderboard.csv"
    lines = board.read_text().splitlines()
    rank, _ = lines[1].split(",", 1)
    lines[1] = f"{rank},{bad}"
    board.write_text("\n".join(lines) + "\n")
    with pytest.raises(TaskError, match="non-finite"):
        load_task(iris_copy)
