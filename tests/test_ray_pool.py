"""RayExecutionPool on a local Ray instance (2 CPUs): the same records as the local pool, shipped task data, failures.

Real sandbox executions of the iris solutions (toy/solutions/iris). Skipped with a reason when ray is not installed
(`pip install "ray[client]"`).
"""
import math
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from wmrl.adapters.ray_pool import RayExecutionPool, pack_folder, start_ray
from wmrl.autoresearch.ledger import execute_cached
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.pool import ExecutionPool
from wmrl.execution.tasks import load_task

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "toy" / "solutions" / "iris"
# one or more solutions per status (ok, runtime_error, syntax_error, no_submission, invalid_submission, timeout)
NAMES = ["good_logistic", "good_uniform_baseline", "bad_syntax_missing_paren", "bad_data_wrong_column",
         "bad_sub_no_write", "bad_sub_wrong_columns", "bad_compute_sleep"]
LIMITS = SandboxLimits(wall_s=60, memory_mb=1024)  # generous: a loaded 2-core machine must not turn "ok" into timeout
SLEEPER_LIMITS = SandboxLimits(wall_s=3, memory_mb=1024)
QUICK = ("import os, shutil\n"
         "shutil.copy(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'), os.environ['SUBMISSION_PATH'])")


@pytest.fixture(scope="module")
def ray():
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'ray[client]' (the `scale` extra)")
    if not ray.is_initialized():
        start_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_a_slow_node_start_is_retried_and_other_errors_are_not(monkeypatch):
    "start_ray retries Ray's 'timed out during startup' (a loaded machine), and raises anything else at once."
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'ray[client]' (the `scale` extra)")
    calls, shutdowns = [], []
    def init(**kwargs):
        calls.append(kwargs)
        if len(calls) < 3:
            raise Exception("The current node timed out during startup. This could happen because ...")
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: shutdowns.append(1))
    start_ray(num_cpus=2)
    assert len(calls) == 3 and calls[-1] == {"num_cpus": 2} and len(shutdowns) == 2
    calls.clear()
    monkeypatch.setattr(ray, "init", lambda **kw: (calls.append(kw), (_ for _ in ()).throw(ValueError("bad address")))[1])
    with pytest.raises(ValueError, match="bad address"):
        start_ray(address="nowhere:1")
    assert len(calls) == 1


@pytest.fixture(scope="module")
def iris():
    return load_task(REPO / "toy" / "tasks" / "iris")


@pytest.fixture(scope="module")
def pool(ray, tmp_path_factory):
    with RayExecutionPool(backend="auto", cache_dir=str(tmp_path_factory.mktemp("node-cache"))) as ray_pool:
        yield ray_pool


def kill_busy_worker(wait_s: float = 30.0) -> int | None:
    "SIGKILL the first Ray worker running `_ray_task` (Ray titles a busy worker `ray::<function>`)."
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                title = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if title.startswith(b"ray::_ray_task"):
                os.kill(int(proc.name), signal.SIGKILL)
                return int(proc.name)
        time.sleep(0.05)
    return None


def test_iris_solutions_match_the_local_pool(pool, iris):
    jobs = [(iris, (SOLUTIONS / f"{name}.py").read_text(), SLEEPER_LIMITS if "sleep" in name else LIMITS)
            for name in NAMES]
    on_ray = pool.map(jobs, progress=False)
    with ExecutionPool("auto", max_workers=2) as local:
        on_host = local.map(jobs, progress=False)
    statuses = [r.status for r in on_ray]
    assert statuses == [r.status for r in on_host]
    assert {"ok", "syntax_error", "runtime_error", "no_submission", "invalid_submission", "timeout"} <= set(statuses)
    for ray_record, host_record, name in zip(on_ray, on_host, NAMES):
        assert not ray_record.infra_error, (name, ray_record.message)
        if ray_record.status == "ok":
            assert ray_record.position == pytest.approx(host_record.position, abs=1e-12), name
            assert ray_record.reward == pytest.approx(host_record.reward, abs=1e-12), name
        else:
            assert math.isnan(ray_record.position) and math.isnan(host_record.position)
            assert ray_record.reward == host_record.reward, name
    assert on_ray[0].position > on_ray[1].position  # logistic regression beats the uniform baseline


def test_shipped_folder_from_a_copy_deleted_on_the_driver(ray, iris, tmp_path):
    copy = load_task(shutil.copytree(iris.root, tmp_path / "iris"))
    cache = tmp_path / "fresh-node-cache"
    shipping = RayExecutionPool(backend="auto", cache_dir=str(cache))
    digest = shipping.ship(copy)
    assert digest == pack_folder(iris.public_dir)[0]
    shutil.rmtree(copy.public_dir)  # the node cannot read the driver's folder: only the object store has it
    record = shipping.map([(copy, QUICK, LIMITS)], progress=False)[0]
    assert record.status == "ok" and not record.infra_error, record.message
    assert (cache / digest / "public" / "train.csv").read_bytes() == (iris.public_dir / "train.csv").read_bytes()
    # shared mode reads the driver's path, which is gone: ungraded infra record, never a scored 0
    shared = RayExecutionPool(backend="auto", task_data="shared").map([(copy, QUICK, LIMITS)], progress=False)[0]
    assert shared.infra_error and math.isnan(shared.reward) and "not a directory" in shared.message
    # the private answers gone too: the run succeeds on the node, grading on the driver fails -> infra record
    shutil.rmtree(copy.root)
    ungraded = shipping.map([(copy, QUICK, LIMITS)], progress=False)[0]
    assert ungraded.infra_error and math.isnan(ungraded.reward) and "grading failed" in ungraded.message


def test_a_killed_worker_is_an_infra_record(ray, iris):
    sleeper = "import time\ntime.sleep(20)"
    fragile = RayExecutionPool(backend="auto", max_retries=0, max_in_flight=1)
    killer = threading.Thread(target=kill_busy_worker)
    killer.start()
    lost, after = fragile.map([(iris, sleeper, SandboxLimits(wall_s=30)), (iris, QUICK, LIMITS)], progress=False)
    killer.join()
    assert lost.infra_error and math.isnan(lost.reward) and lost.status == "runtime_error"
    assert "ray task failed" in lost.message and "Worker" in lost.message, lost.message
    assert after.status == "ok" and not after.infra_error  # the batch went on


def test_a_killed_worker_is_retried_when_allowed(ray, iris):
    nap_then_write = "import time\ntime.sleep(3)\n" + QUICK
    retrying = RayExecutionPool(backend="auto", max_retries=1)
    killer = threading.Thread(target=kill_busy_worker)
    killer.start()
    record = retrying.map([(iris, nap_then_write, LIMITS)], progress=False)[0]
    killer.join()
    assert record.status == "ok" and not record.infra_error, record.message


def test_batch_deadline_cancels_and_flags(ray, iris):
    slow = RayExecutionPool(backend="auto", max_in_flight=1)
    started = time.monotonic()
    records = slow.map([(iris, "import time\ntime.sleep(60)", SandboxLimits(wall_s=90)), (iris, QUICK, LIMITS)],
                       progress=False, timeout_s=2)
    assert time.monotonic() - started < 60  # did not wait for the sleeper
    assert all(r.infra_error and math.isnan(r.reward) for r in records)
    assert all("batch timeout" in r.message for r in records)


def test_drop_in_run_batch_for_the_ledger(pool, iris):
    good = (SOLUTIONS / "good_uniform_baseline.py").read_text()
    records, charges = execute_cached([(iris, QUICK, LIMITS), (iris, good, LIMITS), (iris, QUICK, LIMITS)], pool.map)
    assert [r.status for r in records] == ["ok", "ok", "ok"]
    assert [c.hit for c in charges] == [False, False, True]  # the repeated job ran once


def test_settings_and_jobs_are_checked(pool, iris):
    with pytest.raises(ValueError, match="backend must be one of"):
        RayExecutionPool(backend="firecracker")
    with pytest.raises(ValueError, match="num_cpus"):
        RayExecutionPool(num_cpus=0)
    with pytest.raises(TypeError, match="must be a str"):
        pool.map([(iris, b"print(1)", LIMITS)])
    with pytest.raises(TypeError, match="must be an ExecutionJob"):
        pool.map([[iris, QUICK]])
    with pytest.raises(ValueError, match="timeout_s"):
        pool.map([(iris, QUICK, LIMITS)], timeout_s=0)
    assert pool.map([]) == []


def test_pack_folder_refuses_symlinks_and_hashes_content(tmp_path, iris):
    folder = shutil.copytree(iris.public_dir, tmp_path / "public")
    assert pack_folder(folder)[0] == pack_folder(iris.public_dir)[0]
    (folder / "extra.txt").write_text("x")
    assert pack_folder(folder)[0] != pack_folder(iris.public_dir)[0]
    (folder / "answers.csv").symlink_to(iris.answer_path)
    with pytest.raises(ValueError, match="symlink"):
        pack_folder(folder)


def _write_tree(root: Path, files: dict) -> None:
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_pack_then_materialise_round_trips(tmp_path_factory):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from wmrl.adapters.ray_pool import materialise
    names = st.text(alphabet="abcxyz_-.0", min_size=1, max_size=6).filter(lambda n: n not in (".", ".."))
    paths = st.lists(names, min_size=1, max_size=3).map("/".join)
    trees = st.dictionaries(paths, st.binary(max_size=64), min_size=1, max_size=6)

    @settings(max_examples=25, deadline=None)
    @given(files=trees)
    def check(files):
        root = tmp_path_factory.mktemp("tree")
        try:
            _write_tree(root / "public", files)
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            return  # a path that is both a file and a folder: not a folder anyone can have
        digest, blob = pack_folder(root / "public")
        unpacked = materialise(digest, blob, root / "cache")
        assert unpacked == root / "cache" / digest / "public"
        assert pack_folder(unpacked)[0] == digest
        for relative, data in files.items():
            if (root / "public" / relative).is_file():
                assert (unpacked / relative).read_bytes() == data

    check()


def test_train_scorer_routes_anchor_executions_through_ray(ray, iris, tmp_path):
    "`sandbox.ray` in a `wmrl train` config: the TaskScorer's executions become Ray tasks, with the local rewards."
    from wmrl.adapters.train import build_scorer, build_tasks
    from wmrl.adapters.train_config import load_config
    config = load_config("tiny-cpu", [f"sandbox.ray.cache_dir={tmp_path}", "sandbox.ray.num_cpus=1"])
    tasks = build_tasks(config)
    ray_scorer = build_scorer(config, tasks)
    local_scorer = build_scorer(load_config("tiny-cpu"), tasks)
    assert ray_scorer.run_batch is not None and local_scorer.run_batch is None
    task_id = next(iter(tasks))
    rows = [{"task_id": task_id, "completion": text} for text in ("a", "b", "c", "d", "e", "f")]
    via_ray, local = ray_scorer.execute(rows), local_scorer.execute(rows)
    assert via_ray == pytest.approx(local, nan_ok=True)
    assert ray_scorer.counts["executed"] >= 1


def test_agent_anchor_episodes_execute_through_ray(ray, iris, tmp_path):
    """Issue 25, item 4: in agent mode the anchor episodes' executions (the expensive part of the paper's loop) are Ray
    tasks too when `sandbox.ray` is set, with the records the local sandbox gives; episodes fed by the world model
    never reach the cluster."""
    from wmrl.adapters.agent_feedback import SandboxFeedback, WorldModelFeedback
    from wmrl.adapters.research_agent import parse_action
    from wmrl.adapters.train import build_scorer, build_tasks
    from wmrl.adapters.train_config import load_config
    config = load_config("tiny-cpu-agent", [f"sandbox.ray.cache_dir={tmp_path}", "sandbox.ray.num_cpus=1"])
    tasks = build_tasks(config)
    rollout, local = build_scorer(config, tasks), build_scorer(load_config("tiny-cpu-agent"), tasks)
    assert rollout.run_batch is not None and local.run_batch is None
    calls = []
    run_batch = rollout.run_batch
    rollout.run_batch = lambda jobs: calls.append(len(jobs)) or run_batch(jobs)
    task_id = next(iter(tasks))
    rows = [{"task_id": task_id, "wmrl_anchor": True}, {"task_id": task_id, "wmrl_anchor": False}]
    anchor, predicted = rollout._episodes(rows, ["go", "go"], True, None)
    assert isinstance(anchor.feedback, SandboxFeedback) and isinstance(predicted.feedback, WorldModelFeedback)
    action = parse_action(f"```python\n{QUICK}\n```")
    via_ray = anchor.feedback(action)
    assert calls == [1] and via_ray.status == "ok"  # one execution, on the cluster
    predicted.feedback(action)
    assert calls == [1]  # the world model's episode did not execute
    (local_episode, _) = local._episodes(rows, ["go", "go"], True, None)
    here = local_episode.feedback(action)
    assert here.status == via_ray.status and here.reward == pytest.approx(via_ray.reward)
