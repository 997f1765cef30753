"Prompt building: line numbers round-trip, one shared prefix, tasks given as objects or folders."
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.execution.tasks import load_task
from wmrl.world_model.prompts import build_prompts, installed_versions, number_lines, select_fewshot
from wmrl.world_model.verdicts import CHECKS

TASK = Path(__file__).resolve().parent.parent / "toy/tasks/iris"
line_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"), max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.lists(line_text, min_size=1, max_size=30))
def test_numbered_lines_round_trip(lines):
    code = "\n".join(lines)
    numbered = number_lines(code).split("\n") if code.splitlines() else []
    assert len(numbered) == len(code.splitlines())
    for i, (row, original) in enumerate(zip(numbered, code.splitlines()), start=1):
        assert row[:4].strip() == str(i) and row[6:] == original


def test_prefix_is_shared_and_task_forms_agree():
    code = "import os\nprint(os.environ['DATA_DIR'])\n"
    versions = installed_versions()
    from_path = build_prompts(TASK, code, versions=versions)
    from_task = build_prompts(load_task(TASK), code, versions=versions)
    assert [p.check for p in from_path] == list(CHECKS)
    assert len({p.prefix for p in from_path + from_task}) == 1
    assert len({p.suffix for p in from_path}) == 8
    prefix = from_path[0].prefix
    assert "   2  print(os.environ['DATA_DIR'])" in prefix and "scikit-learn" in prefix and "train.csv: 90 rows" in prefix


def test_fewshot_goes_into_the_suffix_only():
    shots = select_fewshot([("import pandas\n", {"status": "runtime_error", "message": "NameError: name 'pd' is not defined"})])
    plain = build_prompts(TASK, "x = 1\n")
    with_shots = build_prompts(TASK, "x = 1\n", fewshot=shots)
    assert plain[0].prefix == with_shots[0].prefix
    assert "NameError" in with_shots[0].suffix and all("EXAMPLES" not in p.suffix for p in with_shots[1:])
