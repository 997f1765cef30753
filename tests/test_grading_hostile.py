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


# ---- issue 24 (3): files built to hang or inflate the grader in the host process ----------------------------------
# On commit d497d63 the first never returned (pandas de-duplicates header names quadratically), the second took 225 s
# and 1.1 GB of the host, and the third put a 1.2 MB message into the record. A streaming csv pass now refuses them
# before pandas reads a byte, and every message is at most 500 characters.

def test_a_header_of_duplicate_names_is_refused_before_pandas(tmp_path):
    path = tmp_path / "submission.csv"
    path.write_text(",".join(["a"] * 524_288) + "\n")  # 1 MiB: the sandbox's size cap lets it through
    result = grade_submission_file(IRIS, path)
    assert (result.status, result.message) == ("invalid_submission", "line 1 has 524288 fields, over the cap of 256")


def test_one_row_of_many_fields_is_refused(tmp_path):
    path = tmp_path / "submission.csv"
    path.write_text(",".join(COLUMNS) + "\n" + ",".join(["1"] * 524_288) + "\n")
    result = grade_submission_file(IRIS, path)
    assert result.status == "invalid_submission" and "line 2 has 524288 fields" in result.message


def test_messages_are_bounded(tmp_path):
    "120 unique extra columns would be named one by one; the message stays short."
    frame = SAMPLE.assign(**{f"extra_column_with_a_long_name_{k:04d}": 0.0 for k in range(120)})
    path = tmp_path / "submission.csv"
    frame.to_csv(path, index=False)
    result = grade_submission_file(IRIS, path)
    assert result.status == "invalid_submission" and "unexpected" in result.message and len(result.message) <= 500
