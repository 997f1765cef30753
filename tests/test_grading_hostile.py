"""Hostile submission files: whatever a solution writes, grading returns a status on the ladder and never raises."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wmrl.execution.grading import grade_submission_file, ladder_reward
from wmrl.execution.tasks import load_task

IRIS = load_task(Path(__file__).resolve().parent.parent / "toy" / "tasks" / "iris")
SAMPLE = pd.read_csv(IRIS.sample_submission_path)
COLUMNS = ["id", "setosa", "versicolor", "virginica"]
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _check(result):
    assert result.status in ("ok", "invalid_submission", "no_submission")
    if result.status == "ok":
        assert math.isfinite(result.raw_score) and 0.0 <= result.position <= 1.0
        assert result.reward == ladder_reward("ok", result.position)
    else:
        assert result.raw_score is None and result.position is None and result.reward == 0.2
        assert result.message


@SETTINGS
@given(data=st.binary(max_size=2000))
def test_random_bytes_never_raise(tmp_path, data):
    path = tmp_path / "submission.csv"
    path.write_bytes(data)
    _check(grade_submission_file(IRIS, path))


@SETTINGS
@given(text=st.text(alphabet=st.sampled_from(list("0123456789.,-eE\n\"aNn id")), max_size=600))
def test_csv_like_text_never_raises(tmp_path, text):
    path = tmp_path / "submission.csv"
    path.write_text("id,setosa,versicolor,virginica\n" + text)
    _check(grade_submission_file(IRIS, path))


values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5), st.text(max_size=3),
                   st.none())


@SETTINGS
@given(rows=st.lists(st.tuples(st.integers(0, 200), values, values, values), max_size=80),
       columns=st.permutations(COLUMNS))
def test_random_frames_never_raise(tmp_path, rows, columns):
    frame = pd.DataFrame(rows, columns=COLUMNS)[columns]
    path = tmp_path / "submission.csv"
    frame.to_csv(path, index=False)
    _check(grade_submission_file(IRIS, path))


@SETTINGS
@given(probs=st.lists(st.tuples(*[st.floats(0, 1)] * 3), min_size=len(SAMPLE), max_size=len(SAMPLE)),
       seed=st.integers(0, 2**16))
def test_any_valid_probabilities_grade_ok_in_any_row_order(tmp_path, probs, seed):
    frame = SAMPLE.copy()
    frame[["setosa", "versicolor", "virginica"]] = np.asarray(probs)
    path = tmp_path / "submission.csv"
    frame.to_csv(path, index=False)
    first = grade_submission_file(IRIS, path)
    assert first.status == "ok", first.message
    frame.sample(frac=1.0, random_state=seed).to_csv(path, index=False)
    second = grade_submission_file(IRIS, path)
    assert second.raw_score == first.raw_score and second.position == first.position
    _check(first)
