"""WMRL inside verl (wmrl.adapters.verl, nbs/515_verl): verl's own compute_advantage on a DataProto, through the
registered estimator, gives the per-row A·m of the kit's TRL path for every method; `import wmrl` loads no verl.

Skipped with a reason when verl is not installed (`pip install -e '.[verl]'`).
"""
import subprocess
import sys

import numpy as np
import pytest

from wmrl.adapters.trl_adapter import advantage_mismatch, group_layout
from wmrl.adapters.verl import (
    ESTIMATORS,
    WMRLSession,
    activate,
    estimator_name,
    headline_rewards,
    last_token_rewards,
    register_estimators,
)
from wmrl.core.correction import CorrectionConfig, WMRLCorrector
from wmrl.core.methods import METHODS


def test_import_wmrl_loads_no_verl():
    code = "import sys, wmrl, wmrl.adapters.verl; assert not any(m.split('.')[0] == 'verl' for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def _steps(n_steps=3, groups=6, G=4, seed=11):
    rng = np.random.default_rng(seed)
    for t in range(n_steps):
        predicted = rng.choice([0.0, 0.1, 0.3, 0.6, 0.8, 1.0], size=groups * G)
        real = np.clip(predicted * 0.6 + rng.normal(0.2, 0.2, groups * G), 0, 1).round(3)
        predicted[rng.integers(groups * G)] = np.nan
        real[rng.integers(groups * G)] = np.nan
        yield {"tasks": [f"t{g % 4}" for g in range(groups) for _ in range(G)], "G": G, "predicted": predicted,
               "real": real, "uids": [f"{t}-{g}" for g in range(groups) for _ in range(G)]}


@pytest.mark.parametrize("method", METHODS)
def test_compute_advantage_matches_trl_path(method):
    pytest.importorskip("verl", reason="the verl extra is not installed")
    import torch
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    register_estimators()
    config = CorrectionConfig(method=method, anchor_fraction=0.34, min_pairs=4, refit_every=1, warmup=1)
    session, core = activate(WMRLSession(config)), WMRLCorrector(config)
    for step in _steps():
        keys, row_group = group_layout(step["tasks"], step["G"])  # the TRL adapter's calls on the same rows
        trl_anchors = core.plan(keys, core.n_steps)[row_group]
        trl_predicted = np.full(len(row_group), np.nan) if core.spec.executes == "all" else step["predicted"]
        expected = core.correct([keys[g] for g in row_group], trl_predicted,
                                np.where(trl_anchors, step["real"], np.nan)).weighted_advantages

        anchors = session.plan(step["uids"], step["tasks"])  # what the WMRL reward manager does
        real = np.where(anchors, step["real"], np.nan)
        predicted = np.full(len(anchors), np.nan) if session.corrector.spec.executes == "all" else step["predicted"]
        session.record(step["uids"], predicted, real)
        n, width = len(anchors), 3
        scores = last_token_rewards(np.full(n, width), width, headline_rewards(predicted, real, anchors))
        data = DataProto.from_dict(tensors={"responses": torch.zeros(n, width, dtype=torch.long),
                                            "response_mask": torch.ones(n, width, dtype=torch.long),
                                            "token_level_rewards": scores},
                                   non_tensors={"uid": np.array(step["uids"], dtype=object)})
        got = compute_advantage(data, adv_estimator=estimator_name(method)).batch["advantages"]
        assert np.array_equal(anchors, trl_anchors)
        assert advantage_mismatch(got[:, 0].double().numpy(), expected) <= 1e-6
        assert torch.equal(got[:, 0:1].expand(-1, width), got)  # A·m on every response token


def test_registered_names():
    pytest.importorskip("verl", reason="the verl extra is not installed")
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    assert all(get_adv_estimator_fn(name) is ESTIMATORS[name] for name in register_estimators())
