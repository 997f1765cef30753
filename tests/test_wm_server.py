"""The world model served from a process of its own (nbs/345_local_server, nbs/346_server): the kit's OpenAI-compatible
local server, started by the launcher the GPU configs use, against the http backend (batching, timeouts, structured
outputs, a server that dies mid-step), the plan's bill for `vllm serve`, and tiny TRL runs on CPU whose world model it
serves: the rewards reach the trainer, and no server process outlives its run (end, dead server, Ctrl-C, SIGTERM)."""
import copy
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from wmrl.adapters.train_config import load_config
from wmrl.world_model.backends import HTTPWorldModel
from wmrl.world_model.prompts import build_prompts, example_task_dir
from wmrl.world_model.server import ServerError, WorldModelServer, free_port, local_server_argv
from wmrl.world_model.static import StaticWorldModel
from wmrl.world_model.verdicts import VERDICT_SCHEMA

REPO = Path(__file__).resolve().parent.parent
TASK = example_task_dir()
JOBS = [(TASK, p.read_text()) for p in sorted((REPO / "toy/solutions/iris").glob("*.py"))]
BROKEN = "def broken(:\n"  # a syntax error: judged without a request


def launch(tmp_path, *extra, name="wm"):
    port = free_port()
    return WorldModelServer(local_server_argv(port, name, tasks=[TASK], extra=extra), f"http://127.0.0.1:{port}/v1", name,
                            tmp_path / "server.log", startup_timeout_s=60)


def get(server, route):
    return json.loads(urllib.request.urlopen(f"{server.root_url}{route}", timeout=10).read())


def post(server, body):
    request = urllib.request.Request(f"{server.base_url}/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def group_gone(pid):
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_predictions_over_http_equal_in_process_and_concurrent_requests_are_batched(tmp_path):
    with launch(tmp_path) as server:
        judge = HTTPWorldModel(server.base_url, server.model, workers=16, server=server)
        over_http = judge.predict(JOBS)
        stats = get(server, "/stats")
    assert [(p.status, p.score) for p in over_http] == [(p.status, p.score) for p in StaticWorldModel().predict(JOBS)]
    assert stats["requests"] == judge.stats["prompts"] > len(JOBS)  # one request a check
    assert stats["batches"] < stats["requests"] and max(stats["batch_sizes"]) > 1  # answered together, as vLLM batches
    assert judge.stats["http_errors"] == judge.stats["unanswered"] == 0


def test_structured_outputs_follow_the_schema_and_a_forbidden_answer_is_refused(tmp_path):
    prompt = build_prompts(TASK, JOBS[0][1])[0]
    with launch(tmp_path) as server:
        judge = HTTPWorldModel(server.base_url, server.model)
        status, payload = post(server, judge.request_body(prompt))
        assert status == 200 and payload["choices"][0]["finish_reason"] == "stop"
        answer = json.loads(payload["choices"][0]["message"]["content"])
        assert set(VERDICT_SCHEMA["required"]) <= set(answer) <= set(VERDICT_SCHEMA["properties"])
        vllm_style = {k: v for k, v in judge.request_body(prompt).items() if k != "response_format"}
        status, other = post(server, {**vllm_style, "structured_outputs": {"json": VERDICT_SCHEMA}})  # vLLM's own field
        assert status == 200 and other["choices"][0]["message"]["content"] == payload["choices"][0]["message"]["content"]
        narrow = {"type": "object", "properties": {"check": {"enum": ["nothing"]}}, "required": ["check"]}
        status, error = post(server, {**vllm_style, "response_format": {"type": "json_schema", "json_schema": {"schema": narrow}}})
        assert status == 400 and "is not one of ['nothing']" in error["error"]["message"]
        status, error = post(server, {**vllm_style, "model": "other"})
        assert status == 404 and "does not exist" in error["error"]["message"]
        assert server.alive()  # bad requests are answered, not fatal


def test_a_timeout_leaves_the_row_ungraded_never_a_fallback_reward(tmp_path, capsys):
    with launch(tmp_path, "--delay-s", "3") as server:
        judge = HTTPWorldModel(server.base_url, server.model, timeout_s=0.5, retries=0, workers=8, server=server)
        started = time.perf_counter()
        lost, kept = judge.predict([JOBS[0], (TASK, BROKEN)])
        assert time.perf_counter() - started < 3 * 8  # each request gave up at its timeout
        assert server.alive()  # slow, not dead: no error, the rows are ungraded
    assert math.isnan(lost.score) and lost.confidence == 0.0 and "did not answer" in lost.feedback
    assert kept.status == "syntax_error" and not math.isnan(kept.score)
    assert judge.stats["unanswered"] == judge.stats["prompts"] > 0 and judge.stats["ungraded"] == 1
    assert "giving up on a request" in capsys.readouterr().err


def test_a_server_that_dies_mid_step_is_one_clear_error(tmp_path):
    server = launch(tmp_path, "--die-after", "5")
    with server:
        judge = HTTPWorldModel(server.base_url, server.model, workers=4, server=server)
        started = time.perf_counter()
        with pytest.raises(ServerError) as error:
            judge.predict(JOBS)
        assert time.perf_counter() - started < 30  # no retry loop against a process that has exited
    message = str(error.value)
    assert "exited with code 3" in message and str(tmp_path / "server.log") in message
    assert re.search(r"dying at request \d+ \(--die-after 5\)", message) and "\n" not in message
    assert server.record()["returncode"] == 3 and group_gone(server.process.pid)


def test_the_plan_bills_the_launched_server_as_the_engine_it_replaces():
    from wmrl.adapters.plan import SERVER_HOST_GIB, plan
    served = load_config("qwen3.5-4b")
    assert served["world_model"]["backend"] == "http" and served["world_model"]["server"]["launch"] is True
    in_process = copy.deepcopy(served)  # the layout it replaces (refused now by load_config: two engines in one process)
    in_process["world_model"].update(backend="vllm", server={**served["world_model"]["server"], "launch": False})
    in_process["world_model"]["options"]["engine_kwargs"]["gpu_memory_utilization"] = served["world_model"]["server"]["gpu_memory_utilization"]
    for hardware in ("h200x1", "h100x8"):
        new, old = plan(served, hardware), plan(in_process, hardware)
        engine = next(e for e in new["engines"] if e["name"] == "world-model vLLM server")
        assert engine["own_process"] and engine["reserved_gib"] == pytest.approx(0.20 * new["hardware"].gpu_gib)
        assert (new["generation_gib"], new["backward_gib"]) == (old["generation_gib"], old["backward_gib"])
        assert new["host_gib"] - old["host_gib"] == pytest.approx(new["processes"] * SERVER_HOST_GIB)


def test_run_configs_validate_the_server_section():
    assert load_config("tiny-cpu-served")["world_model"]["server"]["command"][0] == "{python}"
    with pytest.raises(ValueError, match="did you mean 'lanuch' -> 'launch'"):
        load_config("tiny-cpu-served", ["world_model.server.lanuch=true"])
    with pytest.raises(ValueError, match="set the backend to http"):
        load_config("qwen3.5-4b", ["world_model.backend=vllm"])
    with pytest.raises(ValueError, match="two engines in one process"):
        load_config("qwen3.5-4b", ["world_model.backend=vllm", "world_model.server.launch=false"])
    with pytest.raises(ValueError, match="which the kit sets"):
        load_config("qwen3.5-4b", ["world_model.options.base_url=http://127.0.0.1:8001/v1"])
    load_config("qwen3.5-4b", ["world_model.server.launch=false", "world_model.options.base_url=http://127.0.0.1:8001/v1"])


def run_cli(*args, timeout=600):
    code = "import sys; from wmrl.adapters.train import cli_train; sys.exit(cli_train(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)
    return done.returncode, done.stdout, done.stderr


def same(a, b):
    return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b))


def test_tiny_trl_run_with_its_world_model_served_out_of_process(tmp_path):
    """tiny-cpu-served is tiny-cpu with its static judge behind the kit's local server, launched by the GPU configs'
    launcher: the trainer gets the same predictions and rewards, row for row, and the server is gone afterwards."""
    code, out, err = run_cli("tiny-cpu-served", f"output_dir={tmp_path / 'served'}", "trl.max_steps=2")
    assert code == 0, err[-4000:]
    summary = json.loads(out)
    record = summary["world_model_server"]
    assert record["returncode"] is not None and group_gone(record["pid"])  # stopped, its whole group
    assert record["prompts"] > 0 and record["http_errors"] == record["unanswered"] == record["ungraded"] == 0
    log = Path(record["log"]).read_text()
    assert log.count('"POST /v1/chat/completions HTTP/1.1" 200') == record["prompts"]
    assert f"(pid {record['pid']})" in log and record["log"] == str(tmp_path / "served" / "world_model_server.log")
    code, out, err = run_cli("tiny-cpu", f"output_dir={tmp_path / 'local'}", "trl.max_steps=2")
    assert code == 0, err[-4000:]
    served, local = (json.loads((tmp_path / name / "metrics.json").read_text())["wmrl_history"] for name in ("served", "local"))
    assert len(served) == len(local) == 2
    judged = 0
    for over_http, in_process in zip(served, local):
        assert same(over_http["predicted"], in_process["predicted"]) and same(over_http["rewards"], in_process["rewards"])
        judged += sum(not math.isnan(p) for p in over_http["predicted"])
    assert judged > 0  # the served predictions are what the trainer's rewards were made of


def test_a_server_that_dies_mid_run_stops_training_with_one_line(tmp_path):
    command = load_config("tiny-cpu-served")["world_model"]["server"]["command"] + ["--die-after", "10"]
    code, out, err = run_cli("tiny-cpu-served", f"output_dir={tmp_path}", f"world_model.server.command={json.dumps(command)}")
    assert code == 2 and not out.strip(), err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith('{"error"')]  # tqdm may redraw its bar after it
    assert len(errors) == 1, err[-3000:]
    message = json.loads(errors[0])["error"]
    assert message.startswith("ServerError: world-model server") and "exited with code 3" in message
    assert str(tmp_path / "world_model_server.log") in message and "(--die-after 10)" in message
    assert not (tmp_path / "metrics.json").exists()  # no summary made of fallback rewards


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_stops_its_server(tmp_path, sig):
    code = "import sys; from wmrl.adapters.train import cli_train; sys.exit(cli_train(sys.argv[1:]))"
    # SIGINT as a terminal delivers it: a runner started in the background (`cmd &`) passes SIGINT on ignored, and a
    # Python started with SIGINT ignored never raises KeyboardInterrupt (the run would finish and exit 0)
    trainer = subprocess.Popen([sys.executable, "-c", code, "tiny-cpu-served", f"output_dir={tmp_path}", "trl.max_steps=50"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    log, deadline, pid = tmp_path / "world_model_server.log", time.monotonic() + 300, None
    try:
        while pid is None and time.monotonic() < deadline and trainer.poll() is None:
            found = re.search(r"\(pid (\d+)\)", log.read_text()) if log.exists() else None
            pid = int(found.group(1)) if found else None
            time.sleep(0.2)
        assert pid is not None, "the run never started its server"
        time.sleep(2)  # into the run: the server is healthy, the trainer being built or training
        trainer.send_signal(sig)
        returncode = trainer.wait(timeout=120)
    finally:
        if trainer.poll() is None:
            trainer.kill()
    assert returncode != 0
    if sig == signal.SIGTERM:
        assert returncode == 143  # SystemExit(128 + 15): the run unwound instead of dying on the spot
    assert group_gone(pid)
