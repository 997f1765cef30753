"""Every method consumes the same two streams at the same ratio: same tasks, same anchor groups, and (at equal
parameters) the same programs per step for a seed; real execution only where the method says."""
from pathlib import Path

import numpy as np
import pytest

from wmrl.autoresearch.agent import ProgramPolicy
from wmrl.autoresearch.loop import AutoResearchConfig, AutoResearchRun
from wmrl.autoresearch.steps import sample_groups, step_tasks
from wmrl.core.methods import METHOD_SPECS, METHODS

REPO = Path(__file__).resolve().parents[1]
ANCHOR_METHODS = [m for m in METHODS if METHOD_SPECS[m].executes == "anchors"]


def plan_of(method, seed, steps, n_tasks=6, per_step=4):
    config = AutoResearchConfig(method=method, seed=seed, tasks_per_step=per_step)
    from wmrl.core.correction import WMRLCorrector
    corrector = WMRLCorrector(config.correction_config())
    names = [f"task{i}" for i in range(n_tasks)]
    out = []
    for step in range(steps):
        idx = step_tasks(n_tasks, per_step, seed, step)
        keys = [f"s{step}:{names[i]}" for i in idx]
        flags = corrector.plan(keys, step)
        out.append((idx, flags.tolist()))
        corrector._plan = None
    return out


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_anchor_methods_share_tasks_and_anchor_groups(seed):
    reference = plan_of("wmrl", seed, 25)
    for method in ANCHOR_METHODS:
        assert plan_of(method, seed, 25) == reference, method
    ratio = np.mean([np.mean(flags) for _, flags in reference])
    assert 0.2 <= ratio <= 0.3  # 4 groups per step, at least one anchor: 25% here
    assert all(flags == [True] * 4 for _, flags in plan_of("grpo_real", seed, 5))
    assert all(flags == [False] * 4 for _, flags in plan_of("pure_wm", seed, 5))


def test_same_seed_same_programs_at_equal_parameters():
    from wmrl.autoresearch.programs import task_features
    from wmrl.execution.tasks import load_task
    iris = load_task(REPO / "toy/tasks/iris")
    phi = [task_features(iris)]
    for step in range(3):
        a = sample_groups(ProgramPolicy(seed=2), [iris], phi, [0], seed=2, step=step, group_size=8)
        b = sample_groups(ProgramPolicy(seed=2), [iris], phi, [0], seed=2, step=step, group_size=8)
        assert a[0].codes == b[0].codes


def test_bad_sizes_are_clear_errors():
    with pytest.raises(ValueError, match="tasks_per_step"):
        AutoResearchRun(AutoResearchConfig(tasks_per_step=2, train_tasks=[str(REPO / "toy/tasks/iris")],
                                           heldout_tasks=[str(REPO / "toy/tasks/iris")]), "/tmp/unused")
    with pytest.raises(ValueError, match="steps"):
        AutoResearchConfig(steps=-1)
