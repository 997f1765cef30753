"""MiniVLA's towers through the kit's key map (wmrl.embodied.prismatic, nbs/654) against timm's own ViTs, the classes
openvla-mini trains them with. timm imports torchvision, whose PyPI wheel needs CUDA's torch, so on the CPU machines
of CI these tests skip with that reason; they run wherever timm imports, and the device check runs the same
comparison at MiniVLA-1B's size on the GPU image (`reproductions/vla_gpu_check.py --prismatic`)."""
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from wmrl.embodied.prismatic import TIMM_MODELS, timm_parity, timm_shapes  # noqa: E402
from wmrl.embodied.vla_model import MINIVLA_1B, TINY_VLA  # noqa: E402


def timm_or_skip():
    try:
        import timm
    except Exception as error:  # ImportError without timm; a RuntimeError when torchvision's ops cannot load
        reason = f"timm does not import here ({type(error).__name__}); `make timm-check` runs these, as does the GPU image"
        if os.environ.get("WMRL_NO_SKIP"):  # make timm-check: a skip there would pass having checked nothing
            pytest.fail(reason)
        pytest.skip(reason)
    return timm


def test_tiny_towers_equal_timm():
    timm_or_skip()
    from wmrl.embodied.prismatic import random_prismatic_state
    result = timm_parity(random_prismatic_state(TINY_VLA, scale=0.2), TINY_VLA)
    assert result["dino"] < 1e-5 and result["siglip"] < 1e-5, result


@pytest.mark.parametrize("tower", ["dino", "siglip"])
def test_checkpoint_names_and_shapes_are_timms_at_full_size(tower):
    timm = timm_or_skip()
    import torch
    cfg = MINIVLA_1B[tower]
    with torch.device("meta"):
        model = timm.create_model(TIMM_MODELS[tower], pretrained=False, num_classes=0, img_size=224)
    assert len(model.blocks) == cfg["num_hidden_layers"] + 1  # the checkpoint's depth; the kit reads one block less
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == timm_shapes(tower, cfg)


def test_the_readme_quotes_the_committed_full_size_record():
    "The full-size figures docs/gpu.md quotes are the committed record's (reproductions/bench/prismatic_fullsize.py)."
    import json
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    record = json.loads((root / "reproductions/results/prismatic/minivla_fullsize_cpu.json").read_text())
    assert record["timm_parity_max_abs"]["dino"] == 0.0 and record["timm_parity_max_abs"]["siglip"] == 0.0
    assert record["text_vocab"] == MINIVLA_1B["text_vocab"] and record["embedding_rows"] == MINIVLA_1B["llm"]["vocab_size"]
    readme = " ".join((root / "docs" / "gpu.md").read_text().split())  # the GPU box moved there from README.md
    quoted = (f"a {record['checkpoint_gib']:.1f} GiB run of {record['parameters_loaded'] / 1e9:.2f} B read parameters "
              f"loaded in {record['load_s']:.0f} s")
    assert quoted in readme, quoted
