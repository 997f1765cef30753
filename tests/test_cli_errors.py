"""Bad input at the command line: exit code 2, nothing on stdout, one line on stderr that names the file or key and
the fix. The table of these cases with their messages is in tests/README.md ("Bad input at the command line")."""
import json

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
]


@pytest.mark.parametrize("argv, expected", CASES, ids=[" ".join(a[:3]) for a, _ in CASES])
def test_bad_input_is_one_line_on_stderr(argv, expected, tmp_path, capsys):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("{methods: [wmrl\n")
    code = main([part.format(bad_yaml=bad_yaml) for part in argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", f"stdout should stay empty on an error, got {out!r}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], err
    if lines[0].startswith("{"):
        assert set(json.loads(lines[0])) == {"error"}
