"""The progress model as a service (issue 28, item 3; nbs/658_reward_service): `wmrl serve progress` in a process of
its own speaking Robometer's eval-server protocol, the client's health check, the frames it sends (subsampled, flipped
upright), and the LIBERO loop scoring its episodes through it (`--progress-url`)."""
import json
import re
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def service():
    "The stand-in server on a free port, in its own process; its address read from its first line."
    proc = subprocess.Popen([sys.executable, "-m", "wmrl.cli", "serve", "progress", "--arch", "tiny-robometer",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # blocks until the model is built and the socket listens (or the process dies)
    found = re.search(r"at (http://\S+)", line)
    if not found:
        proc.kill()
        pytest.fail(f"the server did not start: {line!r} {proc.stderr.read()[-2000:]}")
    yield found.group(1)
    proc.terminate()
    proc.wait(timeout=60)


def test_the_service_scores_what_the_in_process_model_scores(service):
    import torch

    from wmrl.embodied.libero import ProgressAdapter
    from wmrl.embodied.reward_service import RewardClient
    from wmrl.embodied.vla_model import build, progress_predict
    client = RewardClient(service)
    assert client.health()["model"] == "tiny-robometer"
    torch.manual_seed(0)  # the server built its model from seed 0 too
    local = build("tiny-robometer").eval()
    episodes = list(np.random.default_rng(5).integers(0, 256, (3, 20, 32, 32, 3), dtype=np.uint8))
    texts = ["open the top drawer", "open the top drawer", "turn on the stove"]
    over_http = ProgressAdapter(client.predict).score(episodes, texts)
    in_process = ProgressAdapter(progress_predict(local)).score(episodes, texts)
    np.testing.assert_allclose(over_http["progress"], in_process["progress"], atol=1e-5)
    batched = client.score(episodes, texts)  # one request for the group: the same numbers
    np.testing.assert_allclose(batched["progress"], in_process["progress"], atol=1e-5)


def test_a_dead_service_stops_the_run_before_any_episode(tmp_path):
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "wmrl.cli", "reproduce", "libero", "--out", str(tmp_path / "run"),
                           "--dry-run", "--progress-url", "http://127.0.0.1:9"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2 and "no progress-model service answers at http://127.0.0.1:9" in done.stderr
    assert not (tmp_path / "run").exists() and time.perf_counter() - started < 120


def test_the_loop_scores_its_episodes_through_the_service(service, tmp_path):
    pytest.importorskip("papermill")
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "wmrl.cli", "reproduce", "libero", "--out", str(out), "--dry-run",
                           "--steps", "1", "--groups", "2", "--rollouts", "2", "--max-steps", "3", "--eval-inits", "40",
                           "--progress-url", service, "--no-progress"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["progress_url"] == service and summary["log"][0]["rows_trained"] > 0


def test_the_request_is_robometers_eval_server_form(monkeypatch):
    """What leaves the client is the multipart form Robometer's eval_server.py rebuilds samples from: a `.npy` file field
    `sample_{i}_trajectory_frames` and a JSON field `sample_{i}` pointing at it, k = 8 frames first and last included,
    each flipped vertically (LIBERO renders upside down). The kit's first Robometer adapter called a loader Robometer
    does not have and sent no frames anywhere."""
    from email.parser import BytesParser
    from email.policy import HTTP

    from wmrl.embodied import reward_service as R
    sent = {}
    monkeypatch.setattr(R.RewardClient, "_call", lambda self, path, body=None, kind=None: sent.update(
        path=path, body=body, kind=kind) or {"outputs_progress": {"progress_pred": [[0.5] * 8]},
                                             "outputs_success": {"success_probs": [[0.0] * 8]}})
    episode = np.random.default_rng(0).integers(0, 256, (30, 16, 16, 3), dtype=np.uint8)
    R.RewardClient("http://robometer:8001").score([episode], ["put both pots on the stove"])
    assert sent["path"] == "/evaluate_batch_npy" and sent["kind"].startswith("multipart/form-data; boundary=")
    form = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {sent['kind']}\r\n\r\n".encode() + sent["body"])
    parts = {p.get_param("name", header="content-disposition"): p for p in form.iter_parts()}
    assert set(parts) == {"sample_0_trajectory_frames", "sample_0", "use_frame_steps"}
    assert parts["sample_0_trajectory_frames"].get_filename().endswith(".npy")
    sample = json.loads(parts["sample_0"].get_payload(decode=True))
    assert sample["sample_type"] == "progress" and sample["trajectory"]["task"] == "put both pots on the stove"
    assert sample["trajectory"]["frames"] == {"__numpy_file__": "sample_0_trajectory_frames"}
    import io
    frames = np.load(io.BytesIO(parts["sample_0_trajectory_frames"].get_payload(decode=True)), allow_pickle=False)
    kept = np.round(np.linspace(0, 29, 8)).astype(int)
    np.testing.assert_array_equal(frames, episode[kept][:, ::-1])
