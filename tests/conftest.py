"""Test-session order. `make test` runs pytest on both cores, one file per worker (`-n 2 --dist loadfile`), and
files are handed out in collection order: the files that take minutes go first, so that the last minutes of the
session are not one long file running alone while the other core idles (longest-first scheduling)."""

# Measured with --durations on 2 cores (seconds): each of these files takes over half a minute.
LONGEST_FIRST = ["test_autoresearch_quick.py", "test_embodied_reproduce.py", "test_docs_browser.py",
                 "test_reproduce_benchmarks.py", "test_widget_headless.py", "test_autoresearch_resume.py",
                 "test_runner_grid.py", "test_agent_sandbox.py", "test_warm.py", "test_trl_distributed.py",
                 "test_ray_pool.py", "test_trl_accelerate.py", "test_trl_agent.py", "test_wm_server.py"]


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
