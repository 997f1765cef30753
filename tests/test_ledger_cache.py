"The execution cache never under-charges: property tests over random job sequences, and JSON round trips."
import json
import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.autoresearch.ledger import Charge, ComputeLedger, ExecutionCache, execute_cached
from wmrl.execution.tasks import load_task

IRIS = load_task(Path(__file__).resolve().parents[1] / "toy" / "tasks" / "iris")


def cost_of(code: str) -> float:
    return 0.5 + (sum(map(ord, code)) % 97) / 10


class Runner:
    "Counts what really ran; the cost of a program depends only on its text (like a deterministic sandbox)."

    def __init__(self):
        self.ran = []

    def __call__(self, batch):
        self.ran.extend(code for _, code in batch)
        return [{"status": "ok", "reward": 0.7, "cpu_s": cost_of(code), "wall_s": 2 * cost_of(code), "infra_error": False}
                for _, code in batch]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a = 1", "b = 2", "c = 3", "d = 4", "e = 5"]), min_size=1, max_size=6),
                min_size=1, max_size=5))
def test_charged_cost_equals_cost_without_cache(batches):
    runner, cache, ledger = Runner(), ExecutionCache(), ComputeLedger("wmrl")
    for step, codes in enumerate(batches):
        _, charges = execute_cached([(IRIS, code) for code in codes], runner, cache)
        ledger.charge_executions(step, charges)
    all_codes = [code for codes in batches for code in codes]
    totals = ledger.totals()
    assert math.isclose(totals["sandbox_cpu_s"], sum(cost_of(c) for c in all_codes))
    assert totals["n_executions"] == len(all_codes)
    assert sorted(runner.ran) == sorted(set(all_codes))          # each distinct program ran exactly once
    assert totals["n_cache_hits"] == len(all_codes) - len(set(all_codes))
    assert math.isclose(totals["cache_hit_cpu_s"], totals["sandbox_cpu_s"] - sum(cost_of(c) for c in set(all_codes)),
                        abs_tol=1e-9)  # sums of floats: 25.2 vs 25.200000000000003


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["wm_s", "update_s", "sandbox_cpu_s"]),
                          st.floats(0, 100, allow_nan=False)), max_size=20), st.integers(0, 20))
def test_ledger_restored_midway_matches_uninterrupted(charges, cut):
    whole, first = ComputeLedger("m"), ComputeLedger("m")
    for step, field, amount in charges:
        whole.charge(step, field, amount)
    for step, field, amount in charges[:cut]:
        first.charge(step, field, amount)
    second = ComputeLedger("other")
    second.load_state_dict(json.loads(json.dumps(first.state_dict())))
    for step, field, amount in charges[cut:]:
        second.charge(step, field, amount)
    for key, value in whole.totals().items():
        assert math.isclose(value, second.totals()[key], rel_tol=1e-12, abs_tol=1e-9)


def test_persistent_cache_shared_between_runs_still_charges(tmp_path):
    path = tmp_path / "cache.json"
    first = ExecutionCache(path)
    runner = Runner()
    _, charges = execute_cached([(IRIS, "a = 1")], runner, first)
    first.save()
    second_runner = Runner()
    _, again = execute_cached([(IRIS, "a = 1")], second_runner, ExecutionCache(path))
    assert second_runner.ran == []
    assert again == [Charge(charges[0].cpu_s, charges[0].wall_s, hit=True)]


def test_rebuilt_task_is_a_new_key(tmp_path):
    import os
    import shutil
    copy = tmp_path / "iris"
    shutil.copytree(IRIS.root, copy)
    task = load_task(copy)
    cache, runner = ExecutionCache(), Runner()
    execute_cached([(task, "a = 1")], runner, cache)
    train = copy / "public" / "train.csv"
    os.utime(train, ns=(train.stat().st_atime_ns, train.stat().st_mtime_ns + 10**9))
    execute_cached([(task, "a = 1")], runner, cache)
    assert runner.ran == ["a = 1", "a = 1"]
