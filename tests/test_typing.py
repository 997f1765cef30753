"""The public API as a type checker and an IDE see it (issue 26): mypy passes on a user's script that drives the
correction step, and catches a misspelt method. `WMRLCorrector`'s methods are defined one per notebook cell and
attached after the class; the class body declares them under `TYPE_CHECKING`, and the last test holds those
declarations to the real signatures."""
from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from wmrl.core.correction import WMRLCorrector

pytest.importorskip("mypy")
REPO = Path(__file__).resolve().parents[1]

USER_SCRIPT = '''
import numpy as np
from wmrl.core.correction import CorrectionConfig, WMRLCorrector

corrector = WMRLCorrector(CorrectionConfig(method="wmrl", anchor_fraction=0.25))
keys = [f"prompt-{k}" for k in range(4)]
flags: np.ndarray = corrector.plan(keys, step=0)
group_ids = np.repeat(np.arange(4), 4)
predicted = np.random.default_rng(0).random(16)
real = np.where(np.repeat(flags, 4), predicted, np.nan)
result = corrector.correct(group_ids, predicted, real)
weights: np.ndarray = result.weighted_advantages
state: dict = corrector.state_dict()
corrector.load_state_dict(state)
'''


def mypy(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "user_training.py"
    path.write_text(script)
    return subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
                           "--no-incremental", "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
                           str(path)], capture_output=True, text=True, cwd=REPO, timeout=600)


def test_mypy_passes_on_a_user_script(tmp_path):
    result = mypy(USER_SCRIPT, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_catches_a_misspelt_method(tmp_path):
    result = mypy(USER_SCRIPT.replace("corrector.plan(", "corrector.plann("), tmp_path)
    assert result.returncode == 1 and '"WMRLCorrector" has no attribute "plann"' in result.stdout, result.stdout


def test_the_declared_methods_are_the_real_ones():
    "Each method declared for type checkers exists at run time with the same parameters, in order."
    tree = ast.parse(Path(inspect.getsourcefile(WMRLCorrector)).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "WMRLCorrector")
    block = next(n for n in cls.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    declared = {f.name: [a.arg for a in f.args.args] for f in block.body if isinstance(f, ast.FunctionDef)}
    assert {"plan", "correct", "state_dict", "load_state_dict"} <= set(declared)
    for name, parameters in declared.items():
        assert list(inspect.signature(getattr(WMRLCorrector, name)).parameters) == parameters, name


def test_the_package_says_it_is_typed():
    assert (REPO / "wmrl" / "py.typed").is_file()


ROOT_SCRIPT = """
import wmrl
from wmrl import CorrectionConfig, WMRLCorrector

corrector: wmrl.WMRLCorrector = WMRLCorrector(CorrectionConfig(method="wmrl"))
assert "wmrl" in wmrl.METHODS
result: wmrl.CorrectionResult | None = None
"""


def test_the_package_root_names_the_correction_step(tmp_path):
    "`from wmrl import WMRLCorrector` works, is the core's class, and mypy sees its type (not Any)."
    import wmrl
    from wmrl.core.correction import CorrectionConfig
    assert wmrl.WMRLCorrector is WMRLCorrector and wmrl.CorrectionConfig is CorrectionConfig
    assert set(wmrl.__all__) >= {"CorrectionConfig", "WMRLCorrector", "CorrectionResult", "METHODS"}
    with pytest.raises(AttributeError, match="no attribute 'WMRLCorector'"):
        wmrl.WMRLCorector  # noqa: B018
    assert mypy(ROOT_SCRIPT, tmp_path).returncode == 0
    typo = mypy(ROOT_SCRIPT + "corrector.plann(['a'], step=0)\n", tmp_path)
    assert typo.returncode == 1 and "has no attribute \"plann\"" in typo.stdout, typo.stdout


def test_the_typed_trainer_declares_grpo_trainers_arguments():
    """`make_wmrl_trainer_class()` builds its class at run time; type checkers see the `TYPE_CHECKING` declaration of
    it instead. Its `__init__` must take exactly TRL's GRPOTrainer arguments but `reward_funcs` (the scorer replaces
    them), plus the kit's own three: a misspelt keyword is then an error, and no real one is."""
    trl = pytest.importorskip("trl")
    from wmrl.adapters import trl_adapter
    tree = ast.parse(Path(inspect.getsourcefile(trl_adapter)).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"
                 and any(isinstance(c, ast.ClassDef) and c.name == "WMRLGRPOTrainer" for c in n.body))
    cls = next(c for c in block.body if isinstance(c, ast.ClassDef))
    init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    declared = {a.arg for a in init.args.args + init.args.kwonlyargs} - {"self"}
    theirs = set(inspect.signature(trl.GRPOTrainer.__init__).parameters) - {"self", "reward_funcs"}
    assert declared == theirs | {"scorer", "corrector", "key_column"}, (declared ^ (theirs | {"scorer", "corrector", "key_column"}))
    assert init.args.vararg is None and init.args.kwarg is None  # no **kwargs: it would swallow a misspelt keyword
    assert {a.target.id for a in cls.body if isinstance(a, ast.AnnAssign)} >= {"wmrl_history", "corrector", "scorer"}


def test_mypy_from_a_folder_outside_the_repo_catches_every_planted_typo(tmp_path):
    """The README's two snippets, copied into a user's own folder with four typos planted, checked by mypy run there:
    it must find the kit (`make setup` adds a path file for type checkers and IDEs, which cannot see the editable
    install's import hook: before, mypy reported import-not-found and, with --ignore-missing-imports, passed every
    typo) and report each typo."""
    from test_readme import _python_block
    readme = (REPO / "README.md").read_text()
    plants = {"core_user.py": ("Use the core in your own trainer", [("corrector.plan(group_keys", "corrector.plann(group_keys"),
                                                                    ('CorrectionConfig(method="wmrl"', 'CorrectionConfig(methd="wmrl"')]),
              "trl_user.py": ("Use WMRL inside TRL", [('key_column="task_id"', 'key_colum="task_id"'),
                                                      ("trainer.wmrl_history[-1]", "trainer.wmrl_histroy[-1]")])}
    for name, (title, typos) in plants.items():
        code = _python_block(readme, title)
        for right, wrong in typos:
            assert right in code, f"the README's {title!r} snippet no longer has {right!r}: plant another typo"
            code = code.replace(right, wrong)
        (tmp_path / name).write_text(code)
    result = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--no-incremental",
                             "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}", *plants],
                            capture_output=True, text=True, cwd=tmp_path, timeout=900)
    expected = ['has no attribute "plann"', 'Unexpected keyword argument "methd"', 'Unexpected keyword argument "key_colum"',
                'has no attribute "wmrl_histroy"']
    assert [e for e in expected if e not in result.stdout] == [] and "Found 4 errors in 2 files" in result.stdout, result.stdout


WARM_SERVER = REPO / "wmrl" / "execution" / "warm_server.py"
WARM_SERVER_MYPY = ["--follow-imports=silent", "--check-untyped-defs", "--no-incremental", "--python-version",
                    f"{sys.version_info.major}.{sys.version_info.minor}"]


def test_mypy_reads_the_warm_server(tmp_path):
    """The warm server (`nbs/291_warm_server`) is a module, not a string (issue 47): mypy passes on it, and reads the
    bodies of its functions, an unannotated one (`_watch_pidns`, the launcher's text) included: a typo planted in
    each of two is reported."""
    clean = subprocess.run([sys.executable, "-m", "mypy", *WARM_SERVER_MYPY, str(WARM_SERVER)],
                           capture_output=True, text=True, cwd=REPO, timeout=600)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    source = WARM_SERVER.read_text()
    plants = [("pidfd = os.pidfd_open(init)", "pidfd = os.pidfd_opn(init)"),
              ('tick, last = os.sysconf("SC_CLK_TCK"), [0.0]', 'tick, last = os.sysconff("SC_CLK_TCK"), [0.0]')]
    for right, wrong in plants:
        assert source.count(right) == 1, f"the warm server no longer has {right!r}: plant another typo"
        source = source.replace(right, wrong)
    (tmp_path / "warm_server.py").write_text(source)
    typo = subprocess.run([sys.executable, "-m", "mypy", *WARM_SERVER_MYPY, str(tmp_path / "warm_server.py")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert typo.returncode == 1 and 'has no attribute "pidfd_opn"' in typo.stdout, typo.stdout
    assert 'has no attribute "sysconff"' in typo.stdout and "Found 2 errors" in typo.stdout, typo.stdout
