"""Benchmark: the research agent's protocol costs per turn (everything except generation and execution).

Measures (a) `parse_action` on realistic and hostile messages of growing size (linear scaling is the goal:
a 4,096-token turn and a 1 MB pathological one), (b) `truncate_observation` on a 1 MB observation,
(c) `task_overview` / `build_messages` on the mini competition, (d) one world-model episode of 4 scripted turns
(static world model, no sandbox). Prints one JSON object; timing lives here, never in a test.
Usage: python reproductions/bench/bench_research_agent.py [--repeat 5]
"""
import argparse
import json
import platform
import tempfile
from pathlib import Path

from wmrl.core.bench import summarize, time_interleaved


def _timed(fn, repeat: int) -> dict:
    "Median, p10 and p90 wall milliseconds of `repeat` calls, in the format of every kit benchmark."
    return summarize(time_interleaved({"run": fn}, repeats=repeat, warmup=0)["run"], "wall")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    from wmrl.adapters.agent_actions import parse_action, truncate_observation
    from wmrl.adapters.mledojo import build_mini_competition, load_competition
    from wmrl.adapters.research_agent import build_messages, run_episode
    from wmrl.world_model.static import StaticWorldModel

    program = "```python\nimport os\nimport pandas as pd\n" + "x = pd.DataFrame({'a': [1, 2]})\n" * 400 + "```"
    hostile = {size: ("```" * (size // 3)) for size in (10_000, 100_000, 1_000_000)}
    backticks_newlines = {size: ("```\n" * (size // 4)) for size in (10_000, 100_000, 1_000_000)}
    out = {"python": platform.python_version(), "machine": platform.machine()}
    out["parse_program_4k_tokens"] = _timed(lambda: parse_action(program), args.repeat)
    for size, text in hostile.items():
        out[f"parse_fences_only_{size}_chars"] = _timed(lambda text=text: parse_action(text), args.repeat)
    for size, text in backticks_newlines.items():
        out[f"parse_fence_newline_{size}_chars"] = _timed(lambda text=text: parse_action(text), args.repeat)
    observation = "Traceback line of text\n" * 45_000
    out["truncate_1MB_observation_to_1024"] = _timed(lambda: truncate_observation(observation, 1024), args.repeat)
    root = Path(tempfile.mkdtemp(prefix="wmrl-bench-agent-"))
    build_mini_competition(root)
    task = load_competition(root, "breast-cancer-mini", info_root=root)
    out["build_messages"] = _timed(lambda: build_messages(task), args.repeat)
    script = ["<action>request_info</action>", program, "nothing", program]
    def episode():
        queue = list(script)
        run_episode(lambda messages: queue.pop(0), StaticWorldModel(), task, max_turns=4)
    out["world_model_episode_4_turns"] = _timed(episode, args.repeat)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
