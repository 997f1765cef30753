"""The benchmark templates with the multi-turn agent mode (`tasks.program: agent`, config tiny-cpu-agent): the held-out
evaluation plays whole episodes on MLE-Dojo's interface, and the MLE-Dojo template runs end to end with it."""
import json
from pathlib import Path

from wmrl.adapters.benchmark_run import benchmark_config, evaluate_heldout, score_heldout

REPO = Path(__file__).resolve().parents[1]
assert (REPO / "reproductions/configs/tiny-cpu-agent.yaml").is_file(), "the committed config tiny-cpu-agent is missing"


def test_agent_episodes_on_the_mini_competition(tmp_path):
    from wmrl.adapters.mledojo import build_mini_competition, load_competition
    from wmrl.adapters.trl_adapter import tiny_policy
    build_mini_competition(tmp_path / "data", name="breast-cancer-mini-heldout", seed=1)
    config = benchmark_config({"config": "tiny-cpu-agent", "out_dir": str(tmp_path)})
    assert config["tasks"]["program"] == "agent"
    tasks = {"breast-cancer-mini-heldout": load_competition(tmp_path / "data", "breast-cancer-mini-heldout")}
    policy = tiny_policy(tmp_path / "policy", seed=0)
    results = evaluate_heldout(config, policy, tasks, samples=3, seed=0)
    records = results["breast-cancer-mini-heldout"]
    assert len(records) == 3 and all(r["turns"] == config["agent"]["max_turns"] for r in records)
    for record in records:
        assert (record["position"] is None) == (record["status"] != "ok")
        assert record["position"] is None or 0.0 <= record["position"] <= 1.0
    scored = score_heldout(results, tasks, "mle-dojo")
    assert set(scored["heldout"]["per_category"]) == {"tabular"}
    assert sum(scored["heldout"]["statuses"].values()) == 3


def test_mledojo_template_in_agent_mode(tmp_path):
    from wmrl.autoresearch.runner import RunSpec, execute_run
    params = {"config": "tiny-cpu-agent", "method": "wmrl", "seed": 0, "steps": 1, "eval_samples": 2, "workers": 2}
    report = execute_run(RunSpec("wmrl__seed0", params), tmp_path, REPO / "reproductions" / "mledojo.ipynb",
                         resolver="wmrl.adapters.benchmark_run:benchmark_config")
    assert report["status"] == "ran"
    metrics = json.loads((tmp_path / "wmrl__seed0" / "metrics.json").read_text())
    assert metrics["benchmark"] == "mle-dojo" and metrics["config"]["steps"] == 1
    assert all(r["turns"] == 2 for records in metrics["results"].values() for r in records)
    assert metrics["compute"]["sandbox_s"] >= 0 and metrics["compute"]["gpus"] == 0
