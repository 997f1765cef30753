"""run_episode on a mini competition in MLE-Dojo's prepared layout (with the real random-acts-of-pizza boards when
../shared/data/mle-dojo is present): a scripted agent that asks for info, submits a crashing program, then the
fix; against the real sandbox, against an MLE-Dojo-style env that exposes only step(), and against the world
model. Plus the prompt/cap plumbing, a tiny random transformers model end to end, and (slow, opt-in) SmolLM2-135M."""
import json
import math
from pathlib import Path

import pytest

from wmrl.adapters.agent_feedback import SandboxFeedback
from wmrl.adapters.kaggle_env import KaggleEnv
from wmrl.adapters.mledojo import build_mini_competition, load_competition
from wmrl.adapters.research_agent import build_messages, run_episode, transformers_generate_fn, world_model_reward
from wmrl.world_model.static import StaticWorldModel

DOJO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "mle-dojo"
PIZZA = DOJO / "competitions" / "random-acts-of-pizza"

BUGGY = """Train on the label column.
```python
import os
import pandas as pd
train = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "train.csv"))
labels = train["label"]
```"""
FIXED = """The column is target. Fit a scaled logistic regression.
```python
import os
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
```"""
SCRIPT = ["Look at the metadata first.\n<action>request_info</action>\n<info_type>metadata</info_type>", BUGGY, FIXED]


class Scripted:
    "A generate_fn that replays messages and records what it was shown."
    def __init__(self, responses):
        self.responses, self.seen = list(responses), []

    def __call__(self, messages, max_new_tokens=None):
        self.seen.append((len(messages), max_new_tokens))
        messages.append({"role": "user", "content": "mutating my copy must not matter"})
        return self.responses.pop(0)


class StepOnly:
    "An MLE-Dojo-style env that exposes only step(), like the real package (no execution record)."
    def __init__(self, env):
        self._env = env

    def step(self, action, **kwargs):
        return self._env.step(action, **kwargs)


@pytest.fixture(scope="module")
def competition(tmp_path_factory):
    if not PIZZA.is_dir():
        print(f"NOTE: {PIZZA} absent; the mini competition uses the kit's reference boards instead of real ones")
    root = tmp_path_factory.mktemp("agent")
    build_mini_competition(root, board_source=PIZZA if PIZZA.is_dir() else None)
    return load_competition(root, "breast-cancer-mini", info_root=DOJO if DOJO.is_dir() else None)


def test_real_episode_reward_is_best_turn(competition):
    agent = Scripted(SCRIPT)
    trajectory = run_episode(agent, KaggleEnv(competition), competition, max_turns=3)
    assert trajectory.source == "sandbox"
    assert [t.action.kind for t in trajectory.turns] == ["request_info", "execute_code", "execute_code"]
    assert trajectory.statuses == ["request_info", "runtime_error", "ok"]
    assert trajectory.rewards[:2] == [0.0, 0.1]
    position = trajectory.turns[2].position
    assert 0 < position <= 1 and trajectory.rewards[2] == pytest.approx(0.5 + 0.5 * position)
    assert trajectory.reward == max(trajectory.rewards) and trajectory.best_turn == 2
    crash = trajectory.turns[1].observation
    assert crash.startswith("=== Code Execution Results ===\nExecution failed: Traceback") and "KeyError: 'label'" in crash
    assert '"metric": "roc_auc"' in trajectory.turns[0].observation
    assert "Private Leaderboard: Position" in trajectory.turns[2].observation
    # the agent saw the growing conversation, got the token cap, and its mutations did not leak back
    assert agent.seen == [(2, 4096), (4, 4096), (6, 4096)]
    assert [m["role"] for m in trajectory.messages] == ["system", "user"] + ["assistant", "user"] * 3
    assert trajectory.messages[3]["content"].endswith("Turn 2 of 3.")
    assert all(t.generate_s >= 0 and t.env_s >= 0 for t in trajectory.turns) and trajectory.wall_s > 0
    assert trajectory.turns[2].detail["record"]["backend"]
    json.dumps(trajectory.to_dict())


def test_step_only_env_gives_the_same_ladder(competition):
    kit = run_episode(Scripted(SCRIPT), KaggleEnv(competition), competition, max_turns=3)
    plain = run_episode(Scripted(SCRIPT), StepOnly(KaggleEnv(competition)), competition, max_turns=3)
    assert plain.statuses == kit.statuses
    assert plain.rewards == pytest.approx(kit.rewards)
    assert plain.turns[2].detail["env_reward"] == pytest.approx(kit.turns[2].position)


def test_world_model_episode(competition):
    trajectory = run_episode(Scripted(SCRIPT), StaticWorldModel(), competition, max_turns=3)
    assert trajectory.source == "world_model"
    assert trajectory.statuses == ["request_info", "runtime_error", "ok"]
    assert trajectory.rewards[:2] == [0.0, 0.1] and trajectory.rewards[2] >= 0.5
    crash = trajectory.turns[1].observation
    assert crash.startswith("=== Code Execution Results ===\nExecution failed: Traceback (most recent call last):")
    assert 'File "solution.py", line 4, in <module>' in crash and crash.rstrip().endswith("KeyError: 'label'")
    ok = trajectory.turns[2].observation
    assert "Submission successful" in ok and "Average Position Score:" in ok
    if PIZZA.is_dir():
        assert "Private Leaderboard: Position" in ok and "/ 462" in ok
    assert trajectory.reward == trajectory.rewards[2] and trajectory.best_turn == 2
    assert trajectory.turns[2].detail["prediction"]["status"] == "ok"
    # the anchor pair of a real trajectory: predicted best equals this episode's predicted best
    real = run_episode(Scripted(SCRIPT), KaggleEnv(competition), competition, max_turns=3)
    assert world_model_reward(real, StaticWorldModel(), competition) == pytest.approx(trajectory.reward)


def test_validate_turns_pay_nothing_and_caps_apply(competition):
    validate = FIXED.replace("The column is target.", "<action>validate_code</action> The column is target.")
    trajectory = run_episode(Scripted(["nothing useful", validate]), KaggleEnv(competition), competition,
                             max_turns=2, observation_max_tokens=12)
    assert trajectory.statuses == ["malformed", "validate_code"] and trajectory.rewards == [0.0, 0.0]
    assert trajectory.reward == 0.0 and trajectory.best_turn is None
    assert "tokens truncated" in trajectory.turns[1].observation  # capped at 12 whitespace tokens
    assert math.isnan(world_model_reward(trajectory, StaticWorldModel(), competition))


def test_bad_arguments(competition):
    with pytest.raises(TypeError, match="callable"):
        run_episode("not a function", StaticWorldModel(), competition)
    with pytest.raises(TypeError, match="expected str"):
        run_episode(lambda messages: 42, StaticWorldModel(), competition, max_turns=1)
    with pytest.raises(TypeError, match="step"):
        SandboxFeedback(StaticWorldModel())
    with pytest.raises(ValueError, match="positive int"):
        run_episode(Scripted(SCRIPT), StaticWorldModel(), competition, observation_max_tokens=0)


def test_tiny_random_transformers_model_end_to_end(competition):
    pytest.importorskip("torch")
    from wmrl.world_model.backends import tiny_random_model
    model, tokenizer = tiny_random_model(seed=0)
    generate = transformers_generate_fn(model, tokenizer, temperature=1.0, seed=0)
    trajectory = run_episode(generate, StaticWorldModel(), competition, max_turns=2, max_new_tokens=16,
                             overview_max_tokens=60, tokenizer=tokenizer)
    assert len(trajectory.turns) == 2
    for turn in trajectory.turns:  # random weights write noise: whatever it is, it is parsed, capped and scored
        assert len(tokenizer.encode(turn.response, add_special_tokens=False)) <= 16 + 2
        assert turn.action.kind in ("request_info", "execute_code", "validate_code", "malformed")
    assert trajectory.reward >= 0.0


@pytest.mark.slow
def test_smollm2_agent_few_turns(competition):
    pytest.importorskip("torch")
    import transformers

    from wmrl.world_model.backends import smollm2_path
    try:
        path = smollm2_path()
    except FileNotFoundError as err:
        pytest.skip(f"SmolLM2 weights unavailable: {err}")
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path)
    generate = transformers_generate_fn(model, tokenizer, temperature=0.7, seed=0)
    messages = build_messages(competition, max_turns=2, overview_max_tokens=300, tokenizer=tokenizer)
    assert len(tokenizer.apply_chat_template(messages, tokenize=True)) < 2048
    for env in (StaticWorldModel(), KaggleEnv(competition)):
        trajectory = run_episode(generate, env, competition, max_turns=2, max_new_tokens=64,
                                 overview_max_tokens=300, tokenizer=tokenizer)
        print(trajectory.source, trajectory.statuses, trajectory.rewards)
        assert len(trajectory.turns) == 2 and all(t.response.strip() for t in trajectory.turns)
        assert 0.0 <= trajectory.reward <= 1.0
