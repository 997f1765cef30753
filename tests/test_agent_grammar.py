"""The program grammar and the policy of wmrl.autoresearch.agent without executing anything: every slot value renders to
code that compiles for every kind of task, rendering is deterministic, the policy's gradient matches finite
differences, GRPO on a synthetic reward moves the policy, and state survives a JSON round trip."""
from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.autoresearch.agent import ProgramPolicy
from wmrl.autoresearch.programs import (
    FAMILIES,
    FEATURE_NAMES,
    MISTAKES,
    SLOTS,
    Program,
    planted_status,
    task_features,
    with_mistake,
)
from wmrl.autoresearch.render import render
from wmrl.execution.grading import ladder_reward
from wmrl.execution.tasks import load_task

IRIS = Path(__file__).resolve().parent.parent / "toy" / "tasks" / "iris"


@dataclass(frozen=True)
class FakeTask:
    "Just the attributes render reads: enough to cover every kind of target without writing task folders."
    name: str
    metric: str
    id_column: str
    target_columns: tuple
    label_column: str | None = None


TASK_KINDS = {
    "multiclass_proba_label_column": FakeTask("m1", "log_loss", "id", ("a", "b", "c"), "label"),
    "multiclass_proba_onehot": FakeTask("m2", "log_loss", "Id", ("a", "b", "c")),
    "binary_proba": FakeTask("b", "roc_auc", "id", ("target",)),
    "label": FakeTask("l", "accuracy", "row_id", ("class",)),
    "regression": FakeTask("r", "rmse", "id", ("price",)),
    "regression_rmsle": FakeTask("r2", "rmsle", "id", ("Sales",)),
}

programs_strategy = st.builds(Program, **{slot: st.sampled_from(values) for slot, values in SLOTS.items()})


@pytest.mark.parametrize("kind", sorted(TASK_KINDS))
@pytest.mark.parametrize("slot", list(SLOTS))
def test_every_slot_value_compiles_except_the_syntax_slip(kind, slot):
    task = TASK_KINDS[kind]
    for family in FAMILIES:
        for value in SLOTS[slot]:
            program = Program(**{**Program(family=family).to_dict(), slot: value})
            source = render(program, task)
            if value == "syntax_slip":
                with pytest.raises(SyntaxError):
                    compile(source, "solution.py", "exec")
            else:
                compile(source, "solution.py", "exec")


@given(programs_strategy, st.sampled_from(sorted(TASK_KINDS)))
@settings(max_examples=300, deadline=None)
def test_any_program_compiles_iff_it_has_no_syntax_slip(program, kind):
    source = render(program, TASK_KINDS[kind])
    assert source == render(program, TASK_KINDS[kind])  # deterministic
    if program.slip == "syntax_slip":
        with pytest.raises(SyntaxError):
            ast.parse(source)
    else:
        ast.parse(source)


def _names_used_and_bound(source: str) -> tuple[set, set]:
    tree = ast.parse(source)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return used, bound


@given(programs_strategy.filter(lambda p: p.slip not in ("syntax_slip", "missing_import")), st.sampled_from(sorted(TASK_KINDS)))
@settings(max_examples=200, deadline=None)
def test_clean_imports_bind_every_name(program, kind):
    used, bound = _names_used_and_bound(render(program, TASK_KINDS[kind]))
    assert used - bound - {"str", "float", "print", "sorted", "enumerate"} == set()


def test_missing_import_leaves_exactly_the_estimator_unbound():
    for family in FAMILIES:
        used, bound = _names_used_and_bound(render(with_mistake("missing_import", Program(family=family)), TASK_KINDS["label"]))
        missing = used - bound - {"str", "float", "print", "sorted", "enumerate"}
        assert len(missing) == 1 and next(iter(missing)).endswith(("Classifier", "SVC", "NB", "Regression"))


def test_mistakes_plant_what_they_say():
    iris = load_task(IRIS)
    clean = render(Program(), iris)
    assert 'os.environ["DATA_DIR"]' in clean and 'os.environ["SUBMISSION_PATH"]' in clean
    expectations = {
        "hardcoded_data_path": '"/kaggle/input/iris"', "wrong_target_name": 'train["Species"]',
        "wrong_kwarg": "n_estimator=150", "too_slow": "n_estimators=2_000_000",
        "unfitted_predict": "final_model.predict_proba", "raw_test_frame": "model.predict_proba(test)",
        "hardcoded_submission_path": '"/tmp/submission.csv"',
        "wrong_submission_columns": '{"Id":',
    }
    for name, snippet in expectations.items():
        assert snippet not in clean and snippet in render(with_mistake(name), iris), name
    assert "to_csv" not in render(with_mistake("forgot_submission"), iris)
    assert "RandomForestClassifier" not in render(with_mistake("missing_import"), iris).split("# Load")[0]
    # comments state intent and never flag the mistake
    for name in MISTAKES:
        comments = [line for line in render(with_mistake(name), iris).splitlines() if line.lstrip().startswith("#")]
        assert not any(word in " ".join(comments).lower() for word in ("mistake", "wrong", "bug", "forgot"))


def test_render_rejects_bad_inputs():
    with pytest.raises(TypeError, match="Program"):
        render({"family": "knn"}, TASK_KINDS["label"])
    with pytest.raises(TypeError, match="no 'name'"):
        render(Program(), object())
    with pytest.raises(ValueError, match="one target column"):
        render(Program(), FakeTask("x", "rmse", "id", ("a", "b")))
    with pytest.raises(ValueError, match="unknown metric"):
        render(Program(), FakeTask("x", "nonsense", "id", ("a",)))
    with pytest.raises(ValueError, match="family"):
        Program(family="xgboost")


def test_task_features_of_iris():
    phi = task_features(load_task(IRIS))
    assert phi.shape == (len(FEATURE_NAMES),)
    named = dict(zip(FEATURE_NAMES, phi))
    assert named["multiclass"] == 1 and named["binary"] == 0 and named["metric_proba"] == 1
    assert named["frac_categorical"] == 0 and named["frac_missing"] == 0
    assert math.isclose(named["log_features"], math.log10(5) / 3)


# ---------------------------------------------------------------- policy

def _random_batch(seed: int, n: int = 7, scale: float = 0.7):
    rng = np.random.default_rng(seed)
    policy = ProgramPolicy(len(FEATURE_NAMES), seed=seed, init_scale=scale)
    phi = rng.normal(size=(n, len(FEATURE_NAMES)))
    programs = [policy.sample(phi[i], 1, rng)[0] for i in range(n)]
    return policy, phi, programs, rng.normal(size=n)


@given(st.integers(0, 10_000))
@settings(max_examples=15, deadline=None)
def test_gradient_matches_finite_differences_everywhere(seed):
    policy, phi, programs, coef = _random_batch(seed)
    grads = policy.grad_log_prob(programs, phi, coef)
    objective = lambda: float(coef @ policy.log_prob(programs, phi))
    eps = 1e-6
    for part, params in (("weights", policy.weights), ("biases", policy.biases)):
        for slot in SLOTS:
            array = params[slot]
            numeric = np.zeros_like(array)
            for index in np.ndindex(array.shape):
                saved = array[index]
                array[index] = saved + eps
                up = objective()
                array[index] = saved - eps
                down = objective()
                array[index] = saved
                numeric[index] = (up - down) / (2 * eps)
            np.testing.assert_allclose(grads[part][slot], numeric, atol=1e-6, err_msg=f"{part}[{slot}]")


def test_log_prob_is_a_normalised_distribution_per_slot():
    policy, phi, _, _ = _random_batch(3)
    probs = policy.probabilities(phi)
    for p in probs.values():
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    program = Program()
    expected = sum(math.log(probs[s][0, SLOTS[s].index(getattr(program, s))]) for s in SLOTS)
    assert math.isclose(policy.log_prob([program], phi[0])[0], expected, rel_tol=1e-12)


def test_initial_policy_is_realistic_and_matches_the_metric():
    policy = ProgramPolicy()
    iris = task_features(load_task(IRIS))
    assert 0.5 < policy.mistake_probability(iris) < 0.8
    regression = iris.copy()
    regression[[0, 1, 2]] = [0, 0, 1]
    regression[[7, 8, 9]] = [0, 0, 1]
    p_iris = policy.probabilities(iris)["prediction"][0]
    p_reg = policy.probabilities(regression)["prediction"][0]
    assert p_iris[SLOTS["prediction"].index("probabilities")] > 0.75
    assert p_reg[SLOTS["prediction"].index("labels")] > 0.75


def test_sampling_frequencies_match_probabilities():
    policy, phi, _, _ = _random_batch(5, scale=0.3)
    programs = policy.sample(phi[0], 20_000, np.random.default_rng(0))
    probs = policy.probabilities(phi[0])
    for slot in ("family", "slip", "submission"):
        counts = np.array([sum(getattr(p, slot) == v for p in programs) for v in SLOTS[slot]]) / len(programs)
        np.testing.assert_allclose(counts, probs[slot][0], atol=0.015)
    clean = np.mean([not p.mistakes() for p in programs])
    assert abs((1 - clean) - policy.mistake_probability(phi[0])) < 0.015


def _grpo_synthetic(steps: int, preferred: str, seed: int = 0):
    """GRPO (groups of 8, three tasks per step) on the ladder: planted mistakes decide the status, and a clean
    program ranks high only with the preferred family."""
    rng = np.random.default_rng(seed)
    policy = ProgramPolicy(len(FEATURE_NAMES), seed=seed)
    base = task_features(load_task(IRIS))
    tasks = [base, np.where(np.arange(base.size) == 5, 0.5, base), np.r_[0, 0, 1, base[3:7], 0, 0, 1]]
    for _ in range(steps):
        programs, features, advantages = [], [], []
        for phi in tasks:
            group = policy.sample(phi, 8, rng)
            rewards = np.array([ladder_reward(s, 0.9 if p.family == preferred else 0.2) if (s := planted_status(p, phi[5] > 0)) == "ok"
                                else ladder_reward(s) for p in group])
            advantages += list((rewards - rewards.mean()) / (rewards.std() + 1e-4))
            programs += group
            features += [phi] * len(group)
        policy.update(policy.grad_log_prob(programs, np.array(features), np.array(advantages) / len(programs)), lr=0.2, max_norm=5.0)
    return policy, tasks


@pytest.mark.parametrize("preferred", ["knn", "extra_trees"])
def test_a_few_hundred_grpo_steps_move_the_policy_to_the_preferred_family(preferred):
    start = ProgramPolicy(len(FEATURE_NAMES))
    policy, tasks = _grpo_synthetic(300, preferred)
    index = FAMILIES.index(preferred)
    for phi in tasks:
        before = start.probabilities(phi)["family"][0, index]
        after = policy.probabilities(phi)["family"][0, index]
        assert before < 0.1 and after > 0.6, (before, after)
        assert policy.mistake_probability(phi) < 0.5 * start.mistake_probability(phi)
        assert policy.greedy(phi).family == preferred and policy.greedy(phi).mistakes() == []


def test_state_round_trip_through_json():
    policy, phi, programs, coef = _random_batch(11)
    policy.update(policy.grad_log_prob(programs, phi, coef), lr=0.3)
    state = json.loads(json.dumps(policy.state_dict()))
    other = ProgramPolicy(len(FEATURE_NAMES), seed=99)
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.log_prob(programs, phi), policy.log_prob(programs, phi))
    assert other.sample(phi[0], 5, np.random.default_rng(1)) == policy.sample(phi[0], 5, np.random.default_rng(1))
    broken = json.loads(json.dumps(state))
    broken["slots"]["family"] = broken["slots"]["family"][:-1]
    with pytest.raises(ValueError, match="different grammar"):
        other.load_state_dict(broken)
    broken = json.loads(json.dumps(state))
    broken["weights"]["slip"] = broken["weights"]["slip"][:-1]
    with pytest.raises(ValueError, match="shapes"):
        other.load_state_dict(broken)


def test_policy_rejects_bad_inputs():
    policy = ProgramPolicy()
    phi = np.zeros(len(FEATURE_NAMES))
    with pytest.raises(ValueError, match="feature_dim"):
        ProgramPolicy(0)
    with pytest.raises(ValueError, match="shape"):
        policy.log_prob([Program()], np.zeros(3))
    with pytest.raises(ValueError, match="rows"):
        policy.log_prob([Program(), Program()], np.zeros((3, len(FEATURE_NAMES))))
    with pytest.raises(TypeError, match="Program"):
        policy.log_prob([{"family": "knn"}], phi)
    with pytest.raises(ValueError, match="coefficients"):
        policy.grad_log_prob([Program()], phi, [1.0, 2.0])
    with pytest.raises(ValueError, match="NaN"):
        policy.grad_log_prob([Program()], phi, [float("nan")])
    grads = policy.grad_log_prob([Program()], phi)
    with pytest.raises(ValueError, match="lr"):
        policy.update(grads, lr=-1)
    with pytest.raises(ValueError, match="every slot"):
        policy.update({"weights": {}, "biases": {}}, lr=0.1)
    grads["weights"]["family"] = np.full_like(grads["weights"]["family"], np.inf)
    with pytest.raises(ValueError, match="NaN or infinity"):
        policy.update(grads, lr=0.1)


def test_update_clips_the_global_norm():
    policy, phi, programs, coef = _random_batch(2)
    before = policy.state_dict()
    grads = policy.grad_log_prob(programs, phi, 100 * coef)
    norm = policy.update(grads, lr=1.0, max_norm=0.5)
    assert norm > 0.5
    moved = math.sqrt(sum(np.sum((np.asarray(policy.state_dict()[part][s]) - np.asarray(before[part][s])) ** 2)
                          for part in ("weights", "biases") for s in SLOTS))
    assert math.isclose(moved, 0.5, rel_tol=1e-9)


def test_planted_status_follows_run_order():
    assert planted_status(Program()) == "ok"
    assert planted_status(with_mistake("forgot_submission", with_mistake("wrong_kwarg"))) == "runtime_error"
    assert planted_status(with_mistake("unencoded_strings")) == "ok"
    assert planted_status(with_mistake("unencoded_strings"), string_features=True) == "runtime_error"
    for name, mistake in MISTAKES.items():
        assert planted_status(with_mistake(name), string_features=True) == mistake.statuses[0]
