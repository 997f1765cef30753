"""wmrl.core.anchors: cross-process agreement, resume, realised fraction, floor, cap and hypothesis properties."""
import json
import multiprocessing
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.core.anchors import AnchorScheduler, anchor_count, anchor_priority

KEYS = [f"task-{i}" for i in range(37)] + [("tuple", i) for i in range(5)] + list(range(100, 110))


def _selections(seed, n_steps=50):
    "Run in a child process: the anchor flags of every step, as plain lists."
    scheduler = AnchorScheduler(fraction=0.1, seed=seed)
    return [scheduler.select(KEYS, step).tolist() for step in range(n_steps)]


def test_two_spawned_processes_agree():
    expected = _selections(3)
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        results = pool.map(_selections, [3, 3])
    assert results[0] == expected
    assert results[1] == expected
    assert _selections(4) != expected  # the seed matters


def test_agrees_across_hash_seeds():
    "Python's salted hash() would differ between these processes; the blake2b priority must not."
    code = ("import json; from wmrl.core.anchors import anchor_priority; "
            "print(json.dumps([anchor_priority(k, s, 7) for k in ['a', 'titanic', 'x'*50] for s in range(5)]))")
    outputs = []
    for hash_seed in ["1", "2"]:
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
    assert outputs[0] == [anchor_priority(k, s, 7) for k in ["a", "titanic", "x" * 50] for s in range(5)]


def test_resume_gives_identical_selection_and_counters():
    uninterrupted = AnchorScheduler(fraction=0.15, max_concurrent=5, seed=2)
    first = AnchorScheduler(fraction=0.15, max_concurrent=5, seed=2)
    flags_a = [uninterrupted.select(KEYS, step, in_flight=step % 3) for step in range(40)]
    flags_b = [first.select(KEYS, step, in_flight=step % 3) for step in range(20)]
    resumed = AnchorScheduler()  # defaults: the state carries the configuration
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    flags_b += [resumed.select(KEYS, step, in_flight=step % 3) for step in range(20, 40)]
    for a, b in zip(flags_a, flags_b):
        np.testing.assert_array_equal(a, b)
    assert resumed.state_dict() == uninterrupted.state_dict()


def test_realised_fraction_converges_to_target():
    keys = [f"t{i}" for i in range(23)]  # 2.3 groups: rounds to 2 each step → 2/23
    scheduler = AnchorScheduler(fraction=0.10, seed=0)
    for step in range(500):
        scheduler.select(keys, step)
    assert scheduler.realized_fraction == pytest.approx(2 / 23)
    # With a varying number of groups per step, the rate averages close to 0.10.
    rng = np.random.default_rng(0)
    varying = AnchorScheduler(fraction=0.10, seed=0)
    for step in range(2000):
        varying.select([f"t{i}" for i in range(int(rng.integers(10, 200)))], step)
    assert abs(varying.realized_fraction - 0.10) < 0.005
    # Per-task anchor frequency is ~0.10 for every task (no task is starved or favoured).
    keys = [f"t{i}" for i in range(50)]
    counts = np.zeros(len(keys))
    fair = AnchorScheduler(fraction=0.10, seed=1)
    for step in range(3000):
        counts += fair.select(keys, step)
    assert np.all(np.abs(counts / 3000 - 0.10) < 0.03)


def test_floor_of_one():
    scheduler = AnchorScheduler(fraction=0.10, min_per_step=1)
    for n in range(1, 5):
        assert scheduler.select([f"k{i}" for i in range(n)], step=n).sum() == 1
    assert AnchorScheduler(fraction=0.0, min_per_step=0).select(["a", "b"], 0).sum() == 0


def test_cap_binds():
    scheduler = AnchorScheduler(fraction=0.5, max_concurrent=4)
    assert scheduler.select([f"k{i}" for i in range(20)], 0, in_flight=0).sum() == 4
    assert scheduler.select([f"k{i}" for i in range(20)], 1, in_flight=3).sum() == 1
    assert scheduler.select([f"k{i}" for i in range(20)], 2, in_flight=9).sum() == 0
    assert scheduler.realized_fraction == pytest.approx(5 / 60)


def test_errors():
    with pytest.raises(ValueError, match="duplicate"):
        AnchorScheduler().select(["a", "b", "a"], 0)
    with pytest.raises(ValueError, match="duplicate"):
        AnchorScheduler().select([1, np.int64(1)], 0)  # the same key spelled twice
    with pytest.raises(ValueError, match="fraction"):
        AnchorScheduler(fraction=-0.1)
    with pytest.raises(ValueError, match="max_concurrent"):
        AnchorScheduler(max_concurrent=-1)
    with pytest.raises(ValueError, match="in_flight"):
        AnchorScheduler().select(["a"], 0, in_flight=-1)
    with pytest.raises(TypeError, match="list"):
        AnchorScheduler().select([["unhashable"]], 0)


key_lists = st.lists(st.one_of(st.text(max_size=8), st.integers(-10**6, 10**6)), min_size=1, max_size=60,
                     unique_by=lambda k: (type(k).__name__, k))


@settings(max_examples=150, deadline=None)
@given(key_lists, st.integers(0, 10**6), st.integers(0, 2**31), st.floats(0.0, 1.0), st.integers(0, 3),
       st.one_of(st.none(), st.integers(0, 10)), st.integers(0, 12))
def test_selection_properties(keys, step, seed, fraction, floor, cap, in_flight):
    flags = AnchorScheduler(fraction, floor, cap, seed).select(keys, step, in_flight=in_flight)
    # The count is the documented formula.
    assert flags.sum() == anchor_count(len(keys), fraction, floor, cap, in_flight)
    # The chosen groups are those with the lowest priority.
    priorities = np.array([anchor_priority(k, step, seed) for k in keys])
    if flags.any() and (~flags).any():
        assert priorities[flags].max() <= priorities[~flags].min()
    # A permutation of the keys selects the same set.
    order = np.random.default_rng(step).permutation(len(keys))
    permuted = AnchorScheduler(fraction, floor, cap, seed).select([keys[i] for i in order], step, in_flight)
    np.testing.assert_array_equal(permuted, flags[order])


@settings(max_examples=100, deadline=None)
@given(key_lists, st.integers(0, 1000), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_higher_fraction_selects_a_superset(keys, step, f1, f2):
    low, high = sorted([f1, f2])
    chosen_low = AnchorScheduler(low).select(keys, step)
    chosen_high = AnchorScheduler(high).select(keys, step)
    assert not np.any(chosen_low & ~chosen_high)
