"""`Episode` and `observe_batch`: the turn-by-turn protocol the TRL agent rollout is built from. A batch of episodes
played in lock step gives the same trajectories as `run_episode`; the world model is asked once per turn for all
its programs; sandbox actions run in parallel threads; misuse is a clear error."""
import threading

import pytest

from wmrl.adapters.agent_actions import parse_action
from wmrl.adapters.agent_feedback import Outcome, SandboxFeedback, WorldModelFeedback
from wmrl.adapters.kaggle_env import KaggleEnv
from wmrl.adapters.mledojo import build_mini_competition, load_competition
from wmrl.adapters.research_agent import EXAMPLE_MESSAGES, Episode, menu_message, observe_batch, run_episode
from wmrl.world_model.static import StaticWorldModel

SCRIPT = [EXAMPLE_MESSAGES[name] for name in ("request_info", "wrong_column", "logistic")]


class Counting:
    "A world model wrapper that records how many programs each predict call judged."
    def __init__(self):
        self.inner, self.calls = StaticWorldModel(), []

    def predict(self, jobs):
        self.calls.append(len(jobs))
        return self.inner.predict(jobs)


class SlowEnv:
    "A step()-only env that records how many steps run at once (to see the thread pool at work)."
    def __init__(self, env, state):
        self.env, self.state = env, state

    def step(self, action, **kwargs):
        with self.state["lock"]:
            self.state["now"] += 1
            self.state["peak"] = max(self.state["peak"], self.state["now"])
        try:
            return self.env.step(action, **kwargs)
        finally:
            with self.state["lock"]:
                self.state["now"] -= 1


@pytest.fixture(scope="module")
def competition(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    build_mini_competition(root)
    return load_competition(root, "breast-cancer-mini")


def scripted(messages):
    queue = list(messages)
    return lambda history: queue.pop(0)


def play(episodes, script, workers=1):
    for message in script:
        actions = [parse_action(message) for _ in episodes]
        observed = observe_batch([(e.feedback, a) for e, a in zip(episodes, actions)], workers=workers)
        for episode, action, (outcome, seconds) in zip(episodes, actions, observed):
            assert seconds >= 0.0
            episode.record(message, action, outcome, env_s=seconds)
    return [e.trajectory() for e in episodes]


def test_lock_step_batch_matches_run_episode(competition):
    world_model = Counting()
    episodes = [Episode(competition, WorldModelFeedback(world_model, competition), max_turns=3) for _ in range(3)]
    batch = play(episodes, SCRIPT)
    single = run_episode(scripted(SCRIPT), StaticWorldModel(), competition, max_turns=3)
    for trajectory in batch:
        assert trajectory.statuses == single.statuses and trajectory.rewards == single.rewards
        assert trajectory.messages == single.messages and trajectory.best_turn == single.best_turn
    assert world_model.calls == [3, 3]  # turns 2 and 3: one call for the three episodes' programs


def test_sandbox_actions_run_in_parallel(competition):
    state = {"lock": threading.Lock(), "now": 0, "peak": 0}
    episodes = [Episode(competition, SandboxFeedback(SlowEnv(KaggleEnv(competition), state)), max_turns=1)
                for _ in range(3)]
    (first, *_) = play(episodes, [EXAMPLE_MESSAGES["copy_sample"]], workers=3)
    assert first.statuses == ["ok"] and first.source == "sandbox" and first.reward >= 0.5
    assert state["peak"] >= 2


def test_mixed_sources_keep_their_order(competition):
    world_model = Counting()
    feedbacks = [WorldModelFeedback(world_model, competition), SandboxFeedback(KaggleEnv(competition)),
                 WorldModelFeedback(world_model, competition)]
    actions = [parse_action(EXAMPLE_MESSAGES[name]) for name in ("syntax_error", "wrong_column", "request_info")]
    (a, _), (b, _), (c, _) = observe_batch(list(zip(feedbacks, actions)))
    assert (a.status, b.status, c.status) == ("syntax_error", "runtime_error", "request_info")
    assert "KeyError" in b.observation and world_model.calls == [1]


def test_episode_misuse_is_a_clear_error(competition):
    episode = Episode(competition, WorldModelFeedback(StaticWorldModel(), competition), max_turns=1)
    text = episode.record("x", parse_action("x"), Outcome("nothing", 0.0, "malformed"))
    assert text == "nothing" and episode.done  # the last turn gets no "Turn k of K" line
    with pytest.raises(RuntimeError, match="already has its 1 turns"):
        episode.record("x", parse_action("x"), Outcome("", 0.0, "malformed"))
    with pytest.raises(TypeError, match="feedback must be"):
        Episode(competition, StaticWorldModel())
    with pytest.raises(ValueError, match="positive int"):
        Episode(competition, WorldModelFeedback(StaticWorldModel(), competition), max_turns=0)

    class Short:
        def predict(self, jobs):
            return []
    with pytest.raises(ValueError, match="0 predictions for 1 programs"):
        observe_batch([(WorldModelFeedback(Short(), competition), parse_action(EXAMPLE_MESSAGES["logistic"]))])


def test_menu_message_spreads_over_the_menu():
    respond = menu_message(list(EXAMPLE_MESSAGES.values()))
    chosen = {respond(f"noise {k}") for k in range(60)}
    assert len(chosen) == len(EXAMPLE_MESSAGES)  # every message is reachable
    assert all(parse_action(m).kind in ("request_info", "execute_code") for m in EXAMPLE_MESSAGES.values())
    with pytest.raises(TypeError, match="must be a str"):
        respond(None)
