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


class FakePool:
    "The shape of ExecutionPool: `map` runs on the pool's `backend` (here a name); it counts what it ran."

    def __init__(self, backend: str):
        self.backend, self.ran = backend, []

    def map(self, batch, **_):
        self.ran.extend(code for _, code, *_ in batch)
        return [{"status": "ok", "reward": 0.9, "cpu_s": 1.0, "wall_s": 1.0, "backend": self.backend} for _ in batch]


def test_a_record_is_served_only_to_the_backend_that_made_it(tmp_path):
    "Issue 44 (3): the key had no backend, so a warm record was served to a cold request (here through the loop's run)."
    from wmrl.autoresearch.ledger import batch_backend
    from wmrl.autoresearch.loop import AutoResearchConfig, AutoResearchRun
    tasks = [str(IRIS.root)]
    config = dict(train_tasks=tasks, heldout_tasks=tasks, tasks_per_step=1)
    warm, cold = FakePool("warm"), FakePool("bwrap")
    runs = [AutoResearchRun(AutoResearchConfig(**config), tmp_path / name, run_batch=pool.map) for name, pool in (("w", warm), ("c", cold))]
    assert [batch_backend(run.run_batch) for run in runs] == ["warm", "bwrap"]
    assert batch_backend(AutoResearchRun(AutoResearchConfig(**config, backend="docker"), tmp_path / "d").run_batch) == "docker"
    cache = ExecutionCache(tmp_path / "cache.json")
    for run in runs + runs:
        execute_cached([(IRIS, "a = 1")], run.run_batch, cache)
    assert (warm.ran, cold.ran) == (["a = 1"], ["a = 1"])  # each ran once for itself, then was served its own record
    cache.save()
    records, _ = execute_cached([(IRIS, "a = 1")], runs[1].run_batch, ExecutionCache(tmp_path / "cache.json"))
    assert records[0]["backend"] == "bwrap" and cold.ran == ["a = 1"]


def test_a_cache_file_from_before_the_backend_was_in_the_key_misses(tmp_path):
    import hashlib

    from wmrl.autoresearch.ledger import task_fingerprint
    old_key = hashlib.sha256((task_fingerprint(IRIS) + "\n" + "a = 1").encode()).hexdigest()
    path = tmp_path / "old.json"
    path.write_text(json.dumps({old_key: {"status": "ok", "reward": 0.901, "cpu_s": 1.0, "wall_s": 1.0, "backend": "warm-bwrap"}}))
    pool = FakePool("bwrap")
    records, charges = execute_cached([(IRIS, "a = 1")], pool.map, ExecutionCache(path))
    assert (pool.ran, records[0]["backend"], charges[0].hit) == (["a = 1"], "bwrap", False)
