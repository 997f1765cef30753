"""Bad input at the command line: exit code 2, nothing on stdout, one line on stderr that names the file or key and
the fix. The table of these cases with their messages is in tests/NOTES.md ("Bad input at the command line")."""
import json
from pathlib import Path

import pytest

from wmrl.cli import main

CASES = [
    (["frobnicate"], "`wmrl --help` lists the commands"),
    (["reproduce", "bandt"], "did you mean `wmrl reproduce bandit`?"),
    (["run", "/nonexistent-task", "x.py"], "task folder not found: /nonexistent-task"),
    (["grade", "/nonexistent-task", "x.csv"], "task folder not found: /nonexistent-task"),
    (["train", "no-such-config"], "no config file 'no-such-config'"),
    (["train", "tiny-cpu", "correction.methd=wmrl", "--dry-run"], "did you mean 'methd' -> 'method'?"),
    (["train", "tiny-cpu", "corection.method=wmrl", "--dry-run"], "did you mean 'corection' -> 'correction'?"),
    (["train", "tiny-cpu", "trl.learning_rat=1", "--dry-run"], "did you mean 'learning_rat' -> 'learning_rate'?"),
    (["train", "{bad_yaml}", "--dry-run"], "bad.yaml: line 2, column 1 is not valid YAML"),
    (["reproduce", "autoresearch", "--grid", "{bad_yaml}"], "bad.yaml: line 2, column 1 is not valid YAML"),
    # issue 26: inputs that gave a traceback, a raw OS error, a created folder or a confident answer
    (["reproduce", "autoresearch", "--size", "quick", "--out", "{a_file}"], "is a file; give a folder"),
    (["reproduce", "bandit", "--out", "{a_file}"], "is a file; give a folder"),
    (["prior", "fit", "--tasks-dir", "{missing_dir}"], "is not a folder; create it"),
    (["predict", "{tmp}", "{solution}"], "a task folder? `wmrl tasks check"),
    (["reproduce", "autoresearch", "--grid", "{negative_seeds}"], "seeds must be ints >= 0"),
    (["reproduce", "embodied", "--workers", "-2", "--out", "{missing_dir}"], "--workers must be at least 1"),
    (["run", "{task}", "{solution}", "--workers", "-2"], "--workers must be at least 1"),
    # issue 46: a missing optional package names the extra that installs it (vLLM has no CPU build: never here)
    (["predict", "{task}", "{solution}", "--backend", "vllm", "--model", "x"], "install the kit's `gpu` extra: pip install -e '.[gpu]'"),
]


@pytest.mark.parametrize("argv, expected", CASES, ids=[" ".join(a[:3]) for a, _ in CASES])
def test_bad_input_is_one_line_on_stderr(argv, expected, tmp_path, capsys):
    bad_yaml, a_file, missing_dir = tmp_path / "bad.yaml", tmp_path / "a_file.txt", tmp_path / "missing"
    bad_yaml.write_text("{methods: [wmrl\n")
    negative_seeds = tmp_path / "negative.yaml"
    negative_seeds.write_text("name: neg\ntemplate: reproductions/autoresearch.ipynb\nmethods: [wmrl]\nseeds: [0, -1]\n")
    a_file.write_text("not a folder\n")
    solution = Path(__file__).resolve().parents[1] / "toy/solutions/iris/good_logistic.py"
    task = Path(__file__).resolve().parents[1] / "toy/tasks/iris"
    names = dict(bad_yaml=bad_yaml, a_file=a_file, missing_dir=missing_dir, tmp=tmp_path, solution=solution,
                 negative_seeds=negative_seeds, task=task)
    code = main([part.format(**names) for part in argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", f"stdout should stay empty on an error, got {out!r}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], err
    if lines[0].startswith("{"):
        assert set(json.loads(lines[0])) == {"error"}
    assert not missing_dir.exists() and a_file.read_text() == "not a folder\n"  # nothing created, nothing lost
