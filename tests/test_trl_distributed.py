"""Two `torchrun` processes (gloo, CPU) with a group split across them fit the identical calibration.

The anchor plan is computed by both ranks from the gathered group keys, and the (predicted, real) pairs of both
ranks are gathered before `correct()`, so the corrector states written by the two ranks must be equal.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl")
from wmrl.adapters.trl_adapter import tiny_policy  # noqa: E402

WORKER = Path(__file__).with_name("trl_worker_distributed.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    policy = tiny_policy(out / "policy", seed=0)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29517",
               str(WORKER), str(out), str(policy)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_two_ranks_ran(ranks):
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["world_size"] == 2 for r in ranks)
    assert all(len(r["history"]) == 2 for r in ranks)
    assert all(np.isfinite(r["losses"]).all() and r["losses"] for r in ranks)


def test_a_group_is_split_across_ranks(ranks):
    for step in range(2):
        record0, record1 = (r["history"][step] for r in ranks)
        assert record0["local"] == [0, 6] and record1["local"] == [6, 12]
        groups = record0["group_ids"]
        assert set(groups[0:6]) & set(groups[6:12]), "no group has rows on both ranks"


def test_ranks_agree_on_plan_pairs_and_result(ranks):
    for step in range(2):
        record0, record1 = (r["history"][step] for r in ranks)
        for key in ("group_ids", "anchor_rows", "multipliers", "rewards", "advantages"):
            assert record0[key] == record1[key], key
        np.testing.assert_array_equal(np.array(record0["predicted"]), np.array(record1["predicted"]))
        np.testing.assert_array_equal(np.array(record0["real"]), np.array(record1["real"]))
        real = np.array(record0["real"])
        anchor = np.array(record0["anchor_rows"])
        assert np.isfinite(real[anchor]).all() and np.isnan(real[~anchor]).all()


def test_identical_calibration_state(ranks):
    state0, state1 = ranks[0]["state"], ranks[1]["state"]
    assert state0 == state1
    assert state0["debiaser"] is not None and state0["n_steps"] == 2
    assert ranks[0]["history"][-1]["stats"]["n_pairs"] > 0  # pairs from both ranks went into the same map
