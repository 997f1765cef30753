"""MiniVLA's VQ action codec (wmrl.embodied.action_codecs, nbs/651) against vq_bet's own `VqVae`, the class openvla-mini's
VQ tokenizers decode with. vq_bet is not on PyPI (its source is on GitHub), so CI skips these with that reason;
`make vqbet-check` clones it at the Makefile's VQ_BET_COMMIT and runs this file (its notebook holds the codec to a forward written
out from vq_bet's classes in CI)."""
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from wmrl.embodied.action_codecs import load_vq, write_vq_folder  # noqa: E402

SOURCE = Path(os.environ.get("VQ_BET_SRC", "") or "/nonexistent")
V = 1_000  # a vocabulary the ids count back from


@pytest.fixture(scope="module")
def VqVae():
    import importlib.util
    if not (SOURCE / "vqvae" / "vqvae.py").is_file() or importlib.util.find_spec("einops") is None:
        reason = "vq_bet's source (or einops, its one dependency beyond torch) is not here: `make vqbet-check` runs this file"
        if os.environ.get("WMRL_NO_SKIP"):  # make vqbet-check: a skip there would pass having checked nothing
            pytest.fail(reason)
        pytest.skip(reason)
    sys.path.insert(0, str(SOURCE))
    from vqvae.vqvae import VqVae
    return VqVae


def _reference(model, ids):
    "vq_bet's decode as openvla-mini's VQActionTokenizer calls it: codes -> draw_code_forward -> get_action_from_latent."
    with torch.no_grad():
        return model.get_action_from_latent(model.draw_code_forward(torch.as_tensor(V - 1 - ids))).numpy()


def test_the_codec_reads_vq_bets_own_checkpoint(tmp_path, VqVae):
    torch.manual_seed(0)
    config = {"input_dim_h": 8, "input_dim_w": 7, "n_latent_dims": 64, "vqvae_n_embed": 32, "vqvae_groups": 7,
              "eval": True, "device": "cpu", "encoder_loss_multiplier": 1.0, "act_scale": 1.7}
    model = VqVae(**config, load_dir=None)
    for layer in model.vq_layer.layers:  # vq_bet initialises unused codebooks; give every code a vector of its own
        layer._codebook.embed.normal_()
    (tmp_path / "checkpoints").mkdir()
    torch.save(model.state_dict(), tmp_path / "checkpoints" / "model.pt")
    (tmp_path / "config.json").write_text(json.dumps({**config, "load_dir": None}))
    ids = V - 1 - np.random.default_rng(0).integers(0, 32, size=(64, 7))
    codec = load_vq(tmp_path, V)
    np.testing.assert_allclose(codec.chunk(ids), _reference(model, ids), atol=1e-5)
    np.testing.assert_allclose(codec.decode(ids), _reference(model, ids)[:, 0], atol=1e-5)


def test_vq_bet_reads_the_kits_folder(tmp_path, VqVae):
    "The folders the kit's CI tests write are vq_bet's own: VqVae(load_dir=...) loads them, optimiser included."
    folder = write_vq_folder(tmp_path, groups=7, n_embed=128, latent=512, horizon=8, seed=1, act_scale=0.8)
    config = json.loads((folder / "config.json").read_text())
    model = VqVae(**{**config, "load_dir": str(folder / "checkpoints" / "model.pt")})
    ids = V - 1 - np.random.default_rng(1).integers(0, 128, size=(32, 7))
    np.testing.assert_allclose(load_vq(folder, V).chunk(ids), _reference(model, ids), atol=1e-5)
